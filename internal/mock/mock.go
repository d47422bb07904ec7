// Package mock builds valid drover objects for tests. Only test code imports
// it (a test in test/ checks that).
package mock

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// ID returns a new random lowercase UUID.
func ID() string { return uuid.NewString() }

// Node returns a registrable node with its own id and secret.
func Node() *droverv1.Node {
	return &droverv1.Node{
		Id:         ID(),
		SecretId:   ID(),
		Name:       "node-" + ID()[:8],
		Datacenter: "dc1",
		NodeClass:  "standard",
		Attributes: map[string]string{"kernel.name": "linux", "cpu.arch": "amd64", "rack": "r1"},
		Resources:  &droverv1.NodeResources{CpuMhz: 4000, MemoryMb: 8192, DiskMb: 100000},
		Reserved:   &droverv1.NodeReservedResources{CpuMhz: 100, MemoryMb: 256},
	}
}

// Job returns a canonical service job with one group of count allocations.
func Job(count int32) *droverv1.Job {
	return JobOfType(droverv1.JobType_JOB_TYPE_SERVICE, count)
}

// JobOfType returns a canonical job of the type with one group of count
// allocations. Canonicalizing depends on the type (a batch job gets no
// update block), so set the type here rather than on a Job.
func JobOfType(typ droverv1.JobType, count int32) *droverv1.Job {
	j := &droverv1.Job{
		Id:          "job-" + ID()[:8],
		Type:        typ,
		Datacenters: []string{"dc1"},
		TaskGroups: []*droverv1.TaskGroup{{
			Name:      "web",
			Count:     count,
			Resources: &droverv1.Resources{CpuMhz: 100, MemoryMb: 128, Ports: []*droverv1.Port{{Label: "http"}}},
			Tasks:     []*droverv1.Task{{Name: "server", Driver: "exec", Config: map[string]string{"command": "/bin/server"}}},
		}},
	}
	j.Canonicalize()
	return j
}

// Eval returns a pending evaluation of the job.
func Eval(job *droverv1.Job, trigger droverv1.EvalTrigger) *droverv1.Evaluation {
	return &droverv1.Evaluation{
		Id:          ID(),
		Priority:    job.GetPriority(),
		Type:        job.GetType(),
		TriggeredBy: trigger,
		JobId:       job.GetId(),
		Status:      droverv1.EvalStatus_EVAL_STATUS_PENDING,
	}
}

// Alloc returns a new allocation of the job's first group on the node, with
// index i in its name and an id made as the schedulers make them.
func Alloc(node *droverv1.Node, job *droverv1.Job, i int) *droverv1.Allocation {
	tg := job.GetTaskGroups()[0]
	return &droverv1.Allocation{
		Id:         droverv1.NewAllocationID(time.Now()),
		EvalId:     ID(),
		Name:       fmt.Sprintf("%s.%s[%d]", job.GetId(), tg.GetName(), i),
		NodeId:     node.GetId(),
		JobId:      job.GetId(),
		JobVersion: job.GetVersion(),
		TaskGroup:  tg.GetName(),
		Resources: &droverv1.AllocatedResources{
			CpuMhz: tg.GetResources().GetCpuMhz(), MemoryMb: tg.GetResources().GetMemoryMb(),
			Ip:    fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff),
			Ports: []*droverv1.AllocatedPort{{Label: "http", Value: int32(20000 + i%10000)}},
		},
		DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN,
		ClientStatus:  droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_PENDING,
	}
}
