package rpc

import (
	"context"
	"fmt"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// allocService implements droverv1.AllocService.
type allocService struct {
	*services
	droverv1.UnimplementedAllocServiceServer
}

// Get returns one allocation.
func (s *allocService) Get(ctx context.Context, req *droverv1.GetAllocationRequest) (*droverv1.GetAllocationResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	alloc, meta, err := getObject(ctx, s.services, req.GetQuery(), state.TableAllocs, fmt.Sprintf("allocation %s", req.GetAllocId()),
		func(snap *state.Snapshot) *droverv1.Allocation { return snap.AllocByID(req.GetAllocId()) })
	if err != nil {
		return nil, err
	}
	return &droverv1.GetAllocationResponse{Allocation: alloc, Meta: meta}, nil
}

// List returns one page of allocations in id order.
func (s *allocService) List(ctx context.Context, req *droverv1.ListAllocationsRequest) (*droverv1.ListAllocationsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	allocs, next, meta, err := listObjects(ctx, s.services, req.GetQuery(), state.TableAllocs,
		func(snap *state.Snapshot) ([]*droverv1.Allocation, string) {
			return snap.ListAllocs(pageOf(req.GetPage()))
		})
	if err != nil {
		return nil, err
	}
	return &droverv1.ListAllocationsResponse{Allocations: allocs, NextToken: next, Meta: meta}, nil
}
