package droverv1_test

import (
	"testing"

	"github.com/droverhq/drover/internal/version"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestEntryTypeTable(t *testing.T) {
	types := droverv1.EntryTypes()
	if len(types) == 0 {
		t.Fatal("no entry types")
	}
	names := map[string]bool{}
	low := map[droverv1.MessageType]droverv1.MessageType{}
	for _, e := range types {
		if e.Name == "" || names[e.Name] {
			t.Errorf("type %d: name %q empty or used twice", e.Type, e.Name)
		}
		names[e.Name] = true
		if other, ok := low[e.Type&^droverv1.IgnoreUnknownTypeFlag]; ok {
			t.Errorf("types %s and %s share their low seven bits", e.Type, other)
		}
		low[e.Type&^droverv1.IgnoreUnknownTypeFlag] = e.Type
		if !version.Valid(e.Since) {
			t.Errorf("type %s: introduced in %q, not a semantic version", e.Type, e.Since)
		}
		if !version.AtLeast(e.Since, droverv1.FirstRelease) {
			t.Errorf("type %s: introduced in %s, before the first release %s", e.Type, e.Since, droverv1.FirstRelease)
		}
		// A type introduced after the release this tree builds would be
		// unknown to the binary that writes it.
		if !version.AtLeast(version.Version, e.Since) {
			t.Errorf("type %s: introduced in %s, after this build's release %s", e.Type, e.Since, version.Version)
		}
		if since, ok := e.Type.Since(); !ok || since != e.Since || e.Type.String() != e.Name {
			t.Errorf("type %d: Since() = %q, %v and String() = %q disagree with the table row %+v", e.Type, since, ok, e.Type.String(), e)
		}
		if gated := e.Since != droverv1.FirstRelease; e.Type.Gated() != gated {
			t.Errorf("type %s (since %s): Gated() = %v, want %v", e.Type, e.Since, e.Type.Gated(), gated)
		}
	}
}

func TestEntryTypesOfReleases(t *testing.T) {
	for _, tc := range []struct {
		t         droverv1.MessageType
		since     string
		gated     bool
		ignorable bool
	}{
		{droverv1.MessageTypeNodeRegister, "0.1.0", false, false},
		{droverv1.MessageTypeAllocTransition, "0.1.0", false, false},
		{droverv1.MessageTypeClusterMetadata, "0.2.0", true, true},
		{droverv1.MessageTypeJobRegisterChecked, "0.2.0", true, false},
		{droverv1.MessageTypeAllocClientReport, "0.3.0", true, false},
	} {
		since, ok := tc.t.Since()
		if !ok || since != tc.since || tc.t.Gated() != tc.gated || tc.t.Ignorable() != tc.ignorable {
			t.Errorf("%s: since %q (%v), gated %v, ignorable %v; want %s, %v, %v", tc.t, since, ok, tc.t.Gated(), tc.t.Ignorable(), tc.since, tc.gated, tc.ignorable)
		}
	}
	unknown := droverv1.MessageType(99)
	if _, ok := unknown.Since(); ok || !unknown.Gated() || unknown.String() != "MessageType(99)" {
		t.Errorf("type 99: want unknown, gated, named MessageType(99); got gated %v, name %q", unknown.Gated(), unknown.String())
	}
}
