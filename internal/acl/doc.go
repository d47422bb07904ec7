// Package acl is drover's access control language: it parses and validates
// policies, merges a token's policies into one ACL, and answers capability
// checks. It knows nothing of gRPC, raft or the state store: the rpc
// package resolves tokens and decides which capability each call needs.
//
// A policy is HCL or JSON:
//
//	job "web-*"        { policy = "write" }  # jobs whose id matches the glob
//	allocation "web-*" { policy = "read" }   # their allocations and evaluations
//	deployment "*"     { policy = "read" }   # their deployments
//	node               { policy = "read" }
//	event              { policy = "read" }   # the event stream
//	operator           { policy = "deny" }   # raft, scheduler, GC, snapshots
//	acl                { policy = "read" }   # tokens and policies
//
// The job, allocation and deployment blocks take a glob on job ids ("*"
// matches any run of characters); the others take no label. A policy is
// one of deny, read and write; write includes read.
//
// Merging differs from Nomad's on purpose: every rule that matches counts,
// whichever policy it comes from and however specific its glob is. Any
// deny among them wins; otherwise the highest grant does. So no exact
// label ever shadows a broader grant or denial by surprise.
package acl
