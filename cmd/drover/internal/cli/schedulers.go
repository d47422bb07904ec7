package cli

import (
	"fmt"
	"strings"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// schedulerNames maps the scheduler names of the command line to job types.
var schedulerNames = map[string]droverv1.JobType{
	"service": droverv1.JobType_JOB_TYPE_SERVICE,
	"batch":   droverv1.JobType_JOB_TYPE_BATCH,
	"system":  droverv1.JobType_JOB_TYPE_SYSTEM,
}

// ParseSchedulerTypes parses a comma-separated list of scheduler names
// (service, batch, system).
func ParseSchedulerTypes(list string) ([]droverv1.JobType, error) {
	var out []droverv1.JobType
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(strings.ToLower(name))
		if name == "" {
			continue
		}
		t, ok := schedulerNames[name]
		if !ok {
			return nil, fmt.Errorf("unknown scheduler %q: want service, batch or system", name)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scheduler named in %q", list)
	}
	return out, nil
}
