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
	resp := &droverv1.GetAllocationResponse{}
	meta, err := s.query(ctx, req.GetQuery(), func(snap *state.Snapshot) (uint64, error) {
		resp.Allocation = snap.AllocByID(req.GetAllocId())
		if resp.Allocation == nil {
			return atLeastOne(snap.TableIndex(state.TableAllocs)), nil
		}
		return resp.Allocation.GetModifyIndex(), nil
	})
	if err != nil {
		return nil, err
	}
	if resp.Allocation == nil {
		return nil, fmt.Errorf("allocation %s: %w", req.GetAllocId(), state.ErrNotFound)
	}
	resp.Meta = meta
	return resp, nil
}

// List returns one page of allocations in id order.
func (s *allocService) List(ctx context.Context, req *droverv1.ListAllocationsRequest) (*droverv1.ListAllocationsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	resp := &droverv1.ListAllocationsResponse{}
	meta, err := s.query(ctx, req.GetQuery(), func(snap *state.Snapshot) (uint64, error) {
		resp.Allocations, resp.NextToken = snap.ListAllocs(pageOf(req.GetPage()))
		return atLeastOne(snap.TableIndex(state.TableAllocs)), nil
	})
	if err != nil {
		return nil, err
	}
	resp.Meta = meta
	return resp, nil
}
