package audit

import (
	"path/filepath"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"google.golang.org/protobuf/proto"
)

// BenchmarkWrite measures one Write as the server makes it: a write call's
// line of about 250 bytes. "serial" is one caller at a time, so every line
// is its own write(2) (and fsync); "parallel" runs 32 callers per CPU, whose
// lines share groups. ns/op is wall time per line, so the parallel figure
// over the serial one is what group commit buys.
func BenchmarkWrite(b *testing.B) {
	e := Entry{
		Time:     time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC),
		Accessor: "4f1c0d6e-6b1e-4bb1-9d3c-2b5e7a8f9c01",
		Method:   "/drover.v1.JobService/Register",
		Peer:     "10.0.0.7:51234",
		IDs:      map[string]string{"job.id": "web", "request_id": "0c6e1f2a-8d2b-4f6c-a1e3-5b7d9f0a2c4e"},
		Code:     "OK",
		Index:    123456,
	}
	for _, sync := range []bool{false, true} {
		name := "nosync"
		if sync {
			name = "sync"
		}
		b.Run(name+"/serial", func(b *testing.B) {
			l := benchLog(b, sync)
			for b.Loop() {
				if err := l.Write(e); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			l := benchLog(b, sync)
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := l.Write(e); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func benchLog(b *testing.B, sync bool) *Log {
	l, err := Open(filepath.Join(b.TempDir(), "audit.log"), WithSync(sync))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	b.ReportAllocs()
	return l
}

// BenchmarkRequestIDs measures RequestIDs on a large job registration (50
// groups of 10 tasks, two ids) and on a plan that hits the 64-id cap.
func BenchmarkRequestIDs(b *testing.B) {
	for _, bc := range []struct {
		name string
		msg  proto.Message
	}{
		{"register-job", &droverv1.RegisterJobRequest{Job: bigJob("web"), RequestId: "r1"}},
		{"plan-capped", bigPlan(16, 16)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				RequestIDs(bc.msg)
			}
		})
	}
}
