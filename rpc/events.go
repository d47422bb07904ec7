package rpc

import (
	"context"
	"slices"

	"github.com/droverhq/drover/fsm/events"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// eventService implements droverv1.EventService.
type eventService struct {
	*services
	droverv1.UnimplementedEventServiceServer
}

// Stream sends the events of each applied raft entry from the requested
// index on, until the caller cancels, falls behind the buffer, or the server
// shuts down.
func (s *eventService) Stream(req *droverv1.StreamEventsRequest, stream droverv1.EventService_StreamServer) error {
	if err := req.Validate(); err != nil {
		return err
	}
	sub, err := s.backend.Events().Subscribe(events.SubscribeRequest{
		FromIndex: req.GetFromIndex(), Topics: req.GetTopics(), Keys: req.GetKeys(),
	})
	if err != nil {
		return err
	}
	defer sub.Close()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stop := context.AfterFunc(s.shutdown, cancel)
	defer stop()
	for {
		batch, err := sub.Next(ctx)
		if err != nil {
			if s.shutdown.Err() != nil {
				return ErrUnavailable
			}
			return err
		}
		resp := &droverv1.StreamEventsResponse{Events: sanitized(batch.Events), Index: batch.Index, EventsMissed: batch.Missed}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// sanitized returns the events with node secrets removed. Events are shared
// with every subscriber, so an event with a node payload is copied rather
// than changed; the others are passed through.
func sanitized(events []*droverv1.Event) []*droverv1.Event {
	out, copied := events, false
	for i, ev := range events {
		node := ev.GetNode()
		if node.GetSecretId() == "" {
			continue
		}
		if !copied {
			out, copied = slices.Clone(events), true
		}
		c := &droverv1.Event{Topic: ev.GetTopic(), Type: ev.GetType(), Key: ev.GetKey(), Index: ev.GetIndex()}
		c.Payload = &droverv1.Event_Node{Node: node.Sanitized()}
		out[i] = c
	}
	return out
}
