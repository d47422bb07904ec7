// Package worker will hold the scheduler worker pool that runs on every
// server: dequeue an evaluation, wait for the local state to reach its wait
// index, run the scheduler, submit the plan, ack or nack. Nothing is built
// here yet: the scheduling work adds it.
package worker
