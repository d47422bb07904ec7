package rpc_test

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestNodeUsage calls NodeService.Usage on a server with a busy and an idle
// node: each node's capacity and what its allocations hold (a failed one
// not counted), paging in id order, a blocking query woken by an agent's
// report that frees resources, and a bad page refused naming the field.
func TestNodeUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	busy, idle := e.register(), e.register()
	job := e.job(3) // 100 MHz and 128 MB per allocation
	allocs := e.place(busy, job, 3)
	if _, err := e.report(busy, running, allocs[0].GetId(), allocs[1].GetId()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.report(busy, failed, allocs[2].GetId()); err != nil {
		t.Fatal(err)
	}

	resp, err := e.nodes.Usage(e.ctx(), &droverv1.NodeUsageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]*droverv1.NodeUsage)
	for _, u := range resp.GetNodes() {
		got[u.GetId()] = u
	}
	want := map[string][2]int64{busy.GetId(): {200, 256}, idle.GetId(): {0, 0}}
	if len(got) != len(want) || resp.GetNextToken() != "" {
		t.Fatalf("usage of %d nodes (next token %q), want %d on one page", len(got), resp.GetNextToken(), len(want))
	}
	for id, w := range want {
		u := got[id]
		if u.GetUsed().GetCpuMhz() != w[0] || u.GetUsed().GetMemoryMb() != w[1] {
			t.Errorf("node %s: used %v, want %d MHz %d MB", id, u.GetUsed(), w[0], w[1])
		}
		// mock.Node: 4000 MHz and 8192 MB, of which 100 MHz and 256 MB reserved.
		if u.GetCapacity().GetCpuMhz() != 3900 || u.GetCapacity().GetMemoryMb() != 7936 {
			t.Errorf("node %s: capacity %v, want 3900 MHz 7936 MB", id, u.GetCapacity())
		}
		if u.GetStatus() != initializing || u.GetDatacenter() != "dc1" || u.GetName() == "" || u.GetModifyIndex() == 0 {
			t.Errorf("node %s: %v, want its name, datacenter, status and modify index", id, u)
		}
	}
	if resp.GetMeta().GetIndex() == 0 || !resp.GetMeta().GetKnownLeader() {
		t.Errorf("meta %v", resp.GetMeta())
	}

	t.Run("paged in id order", func(t *testing.T) {
		var ids []string
		page := &droverv1.PageOptions{PageSize: 1}
		for calls := 0; ; calls++ {
			if calls > len(want) {
				t.Fatalf("more than %d pages", len(want))
			}
			p, err := e.nodes.Usage(e.ctx(), &droverv1.NodeUsageRequest{Page: page})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range p.GetNodes() {
				ids = append(ids, u.GetId())
			}
			if p.GetNextToken() == "" {
				break
			}
			page.NextToken = p.GetNextToken()
		}
		wantIDs := []string{busy.GetId(), idle.GetId()}
		slices.Sort(wantIDs)
		if !slices.Equal(ids, wantIDs) {
			t.Errorf("paged ids %v, want %v", ids, wantIDs)
		}
	})

	t.Run("a report that frees resources wakes a blocking query", func(t *testing.T) {
		type answer struct {
			resp *droverv1.NodeUsageResponse
			err  error
		}
		done := make(chan answer, 1)
		go func() {
			r, err := e.nodes.Usage(e.ctx(), &droverv1.NodeUsageRequest{Query: &droverv1.QueryOptions{
				MinIndex: resp.GetMeta().GetIndex(), MaxWait: durationpb.New(20 * time.Second)}})
			done <- answer{r, err}
		}()
		if _, err := e.report(busy, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, allocs[0].GetId()); err != nil {
			t.Fatal(err)
		}
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.resp.GetMeta().GetIndex() <= resp.GetMeta().GetIndex() {
			t.Errorf("woke at index %d, not past %d", a.resp.GetMeta().GetIndex(), resp.GetMeta().GetIndex())
		}
		for _, u := range a.resp.GetNodes() {
			if u.GetId() == busy.GetId() && (u.GetUsed().GetCpuMhz() != 100 || u.GetUsed().GetMemoryMb() != 128) {
				t.Errorf("after one allocation completed: used %v, want 100 MHz 128 MB", u.GetUsed())
			}
		}
	})

	t.Run("bad page", func(t *testing.T) {
		_, err := e.nodes.Usage(e.ctx(), &droverv1.NodeUsageRequest{Page: &droverv1.PageOptions{PageSize: -1}})
		wantInvalid(t, err, "page.page_size")
	})
}
