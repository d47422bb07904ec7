package cli

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestMarshalJSONDropsDeprecatedFields(t *testing.T) {
	job := &droverv1.Job{Id: "web", Meta: map[string]string{"note": "a < b && c > d"}, TaskGroups: []*droverv1.TaskGroup{{
		Name:                "g",
		MaxClientDisconnect: durationpb.New(5 * time.Minute),
		ReschedulePolicy:    &droverv1.ReschedulePolicy{Interval: durationpb.New(90 * time.Minute)},
	}}}
	raw, err := marshalJSON(job)
	if err != nil {
		t.Fatal(err)
	}
	got := string(raw)
	for _, want := range []string{`"max_client_disconnect":"300s"`, `"interval":"5400s"`, `"delay":null`, `"a < b && c > d"`} {
		if !strings.Contains(got, want) {
			t.Errorf("no %s in %s", want, got)
		}
	}
	if strings.Contains(got, "_ns\"") {
		t.Errorf("a deprecated nanosecond field is printed: %s", got)
	}
	full, err := jsonOptions.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(full), "interval_ns") {
		t.Fatalf("the full mapping has no interval_ns, so this test checks nothing: %s", full)
	}
}
