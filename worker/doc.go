// Package worker is the scheduler worker pool that runs on every server,
// followers included. Each worker loops: dequeue an evaluation from the
// leader's broker, wait until the local state store has reached the
// evaluation's wait index, run the scheduler against that snapshot, submit
// its plan to the leader, and ack (or nack on any failure).
//
// The package reaches the leader and the local state only through the small
// interfaces it defines (Broker, Leader, LocalState), so it runs in unit
// tests with fakes; the server implements them over internal gRPC.
//
// Waiting is bounded everywhere: a worker whose state is behind nacks at
// once so another server can take the evaluation, then waits longer for its
// own state before dequeuing again (a server replaying raft would otherwise
// nack everything it touches). Stop cancels every wait, and the errors it
// causes wrap ErrShuttingDown.
package worker
