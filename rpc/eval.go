package rpc

import (
	"context"
	"fmt"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// evalService implements droverv1.EvalService.
type evalService struct {
	*services
	droverv1.UnimplementedEvalServiceServer
}

// Get returns one evaluation.
func (s *evalService) Get(ctx context.Context, req *droverv1.GetEvaluationRequest) (*droverv1.GetEvaluationResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	resp := &droverv1.GetEvaluationResponse{}
	meta, err := s.query(ctx, req.GetQuery(), func(snap *state.Snapshot) (uint64, error) {
		resp.Evaluation = snap.EvalByID(req.GetEvalId())
		if resp.Evaluation == nil {
			return atLeastOne(snap.TableIndex(state.TableEvals)), nil
		}
		return resp.Evaluation.GetModifyIndex(), nil
	})
	if err != nil {
		return nil, err
	}
	if resp.Evaluation == nil {
		return nil, fmt.Errorf("evaluation %s: %w", req.GetEvalId(), state.ErrNotFound)
	}
	resp.Meta = meta
	return resp, nil
}

// List returns one page of evaluations in id order.
func (s *evalService) List(ctx context.Context, req *droverv1.ListEvaluationsRequest) (*droverv1.ListEvaluationsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	resp := &droverv1.ListEvaluationsResponse{}
	meta, err := s.query(ctx, req.GetQuery(), func(snap *state.Snapshot) (uint64, error) {
		resp.Evaluations, resp.NextToken = snap.ListEvals(pageOf(req.GetPage()))
		return atLeastOne(snap.TableIndex(state.TableEvals)), nil
	})
	if err != nil {
		return nil, err
	}
	resp.Meta = meta
	return resp, nil
}
