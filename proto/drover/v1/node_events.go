package droverv1

// The subsystem and messages of the node events the servers write about
// drains. They are a contract, not just text: `drover node drain` tells a
// completed drain from one ended early by the completion event, so the
// writers and the readers share these constants.
const (
	// NodeEventSubsystemDrain is the subsystem of every drain event.
	NodeEventSubsystemDrain = "Drain"
	// NodeEventDrainStarted is written when a drain strategy is set.
	NodeEventDrainStarted = "Node drain started"
	// NodeEventDrainStopped is written when an operator ends a drain
	// (`node drain -disable`), whether or not it had completed.
	NodeEventDrainStopped = "Node drain stopped"
	// NodeEventDrainComplete is written when a drain completes: nothing it
	// must move is left on the node, or past the deadline everything left
	// has been marked to move.
	NodeEventDrainComplete = "Node drain complete"
)
