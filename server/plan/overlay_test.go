package plan

import (
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestOverlayLaterVersionReplaces lays two writes that both carry a
// version of one allocation: the later stands alone, on its node and for
// its address.
func TestOverlayLaterVersionReplaces(t *testing.T) {
	running := droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN
	version := func(ip string, cpu int64) *droverv1.Allocation {
		return &droverv1.Allocation{Id: "a1", NodeId: "n1", DesiredStatus: running,
			Resources: &droverv1.AllocatedResources{CpuMhz: cpu, Ip: ip}}
	}
	other := &droverv1.Allocation{Id: "a2", NodeId: "n1", DesiredStatus: running, Resources: &droverv1.AllocatedResources{Ip: "10.0.0.2"}}
	o := newOverlay()
	o.add([]*droverv1.Allocation{version("10.0.0.1", 100), other})
	o.add([]*droverv1.Allocation{version("10.0.0.3", 200)})

	if got := o.alloc("a1").GetResources().GetCpuMhz(); got != 200 {
		t.Errorf("alloc a1 has %d MHz, want the later version's 200", got)
	}
	if on := o.onNode("n1"); len(on) != 2 {
		t.Errorf("node n1 holds %d overlaid allocations, want 2 (a1 once, a2)", len(on))
	}
	for ip, want := range map[string]string{"10.0.0.1": "", "10.0.0.2": "a2", "10.0.0.3": "a1"} {
		if got := o.ipHolder(ip); got != want {
			t.Errorf("address %s held by %q, want %q", ip, got, want)
		}
	}
}
