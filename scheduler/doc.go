// Package scheduler will hold drover's placement logic: the reconciler, the
// service, batch and system schedulers, feasibility checks and ranking. It
// will talk to the rest of drover only through the State and Planner
// interfaces it defines, and import nothing of drover but proto. Nothing is
// built here yet: the scheduling work adds it.
package scheduler
