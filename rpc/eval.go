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
	eval, meta, err := getObject(ctx, s.services, req.GetQuery(), state.TableEvals, fmt.Sprintf("evaluation %s", req.GetEvalId()),
		func(snap *state.Snapshot) *droverv1.Evaluation { return snap.EvalByID(req.GetEvalId()) })
	if err != nil {
		return nil, err
	}
	return &droverv1.GetEvaluationResponse{Evaluation: eval, Meta: meta}, nil
}

// List returns one page of evaluations in id order.
func (s *evalService) List(ctx context.Context, req *droverv1.ListEvaluationsRequest) (*droverv1.ListEvaluationsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	evals, next, meta, err := listObjects(ctx, s.services, req.GetQuery(), state.TableEvals,
		func(snap *state.Snapshot) ([]*droverv1.Evaluation, string) {
			return snap.ListEvals(pageOf(req.GetPage()))
		})
	if err != nil {
		return nil, err
	}
	return &droverv1.ListEvaluationsResponse{Evaluations: evals, NextToken: next, Meta: meta}, nil
}
