package rpc

import (
	"context"
	"fmt"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// stored is an object of the state store with a modify index.
type stored interface {
	comparable
	GetModifyIndex() uint64
}

// getObject serves a read of one object, blocking on its modify index (or,
// while it does not exist, on its table's index). It fails with NotFound,
// naming what, if the object does not exist when the read ends.
func getObject[T stored](ctx context.Context, s *services, opts *droverv1.QueryOptions, table, what string,
	find func(*state.Snapshot) T) (T, *droverv1.QueryMeta, error) {
	var obj, none T
	meta, err := s.query(ctx, opts, func(snap *state.Snapshot) (uint64, error) {
		obj = find(snap)
		if obj == none {
			return atLeastOne(snap.TableIndex(table)), nil
		}
		return obj.GetModifyIndex(), nil
	})
	if err != nil {
		return none, nil, err
	}
	if obj == none {
		return none, nil, fmt.Errorf("%s: %w", what, state.ErrNotFound)
	}
	return obj, meta, nil
}

// listObjects serves a paged listing of a table, blocking on the table's
// index.
func listObjects[T any](ctx context.Context, s *services, opts *droverv1.QueryOptions, table string,
	list func(*state.Snapshot) ([]T, string)) ([]T, string, *droverv1.QueryMeta, error) {
	var (
		items []T
		next  string
	)
	meta, err := s.query(ctx, opts, func(snap *state.Snapshot) (uint64, error) {
		items, next = list(snap)
		return atLeastOne(snap.TableIndex(table)), nil
	})
	if err != nil {
		return nil, "", nil, err
	}
	return items, next, meta, nil
}
