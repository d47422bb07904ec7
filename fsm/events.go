package fsm

import (
	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// eventType names what an entry of msgType did; every event of the entry
// carries it, whatever its topic.
func eventType(msgType droverv1.MessageType) string {
	switch msgType {
	case droverv1.MessageTypeNodeRegister:
		return "NodeRegistered"
	case droverv1.MessageTypeNodeStatus, droverv1.MessageTypeNodeStatusBatch:
		return "NodeStatusUpdated"
	case droverv1.MessageTypeAllocClientUpdate, droverv1.MessageTypeAllocClientReport:
		return "AllocationClientUpdated"
	case droverv1.MessageTypeJobRegister, droverv1.MessageTypeJobRegisterChecked:
		return "JobRegistered"
	case droverv1.MessageTypeJobDeregister:
		return "JobDeregistered"
	case droverv1.MessageTypeEvalUpdate:
		return "EvaluationUpdated"
	case droverv1.MessageTypePlanResult:
		return "PlanApplied"
	case droverv1.MessageTypeNodeEligibility:
		return "NodeEligibilityUpdated"
	case droverv1.MessageTypeNodeDrain:
		return "NodeDrainUpdated"
	case droverv1.MessageTypeAllocTransition:
		return "AllocationTransitionUpdated"
	case droverv1.MessageTypeDeploymentStatus:
		return "DeploymentStatusUpdated"
	case droverv1.MessageTypeDeploymentPromote:
		return "DeploymentPromoted"
	case droverv1.MessageTypeGC:
		// Every object of a GC entry was deleted.
		return "GarbageCollected"
	}
	return msgType.String()
}

// toEvents turns the objects an entry wrote into events. Payloads are the
// stored objects themselves (immutable, shared, never copied here); node
// payloads still hold the node's secret, which whatever sends events out of
// the server must strip (droverv1.Node.Sanitized). Objects without a topic,
// such as server records, make no event.
func toEvents(index uint64, msgType droverv1.MessageType, changes []state.Change) []*droverv1.Event {
	if len(changes) == 0 {
		return nil
	}
	typ := eventType(msgType)
	out := make([]*droverv1.Event, 0, len(changes))
	for _, c := range changes {
		ev := &droverv1.Event{Type: typ, Index: index}
		switch obj := c.Object.(type) {
		case *droverv1.Node:
			ev.Topic, ev.Key = droverv1.Topic_TOPIC_NODE, obj.GetId()
			ev.Payload = &droverv1.Event_Node{Node: obj}
		case *droverv1.Job:
			ev.Topic, ev.Key = droverv1.Topic_TOPIC_JOB, obj.GetId()
			ev.Payload = &droverv1.Event_Job{Job: obj}
		case *droverv1.Allocation:
			ev.Topic, ev.Key = droverv1.Topic_TOPIC_ALLOCATION, obj.GetId()
			ev.Payload = &droverv1.Event_Allocation{Allocation: obj}
		case *droverv1.Evaluation:
			ev.Topic, ev.Key = droverv1.Topic_TOPIC_EVALUATION, obj.GetId()
			ev.Payload = &droverv1.Event_Evaluation{Evaluation: obj}
		case *droverv1.Deployment:
			ev.Topic, ev.Key = droverv1.Topic_TOPIC_DEPLOYMENT, obj.GetId()
			ev.Payload = &droverv1.Event_Deployment{Deployment: obj}
		default:
			continue
		}
		out = append(out, ev)
	}
	return out
}
