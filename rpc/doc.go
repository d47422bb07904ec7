// Package rpc implements drover's gRPC services: the node API agents call
// and the job, allocation, evaluation and event services operators use. It
// validates and authenticates each call, turns writes into raft entries
// through a Backend, serves reads from the local state store, and maps every
// error to one gRPC status in one place (errors.go). It never imports the
// server package: the server implements Backend.
package rpc
