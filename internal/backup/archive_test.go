package backup

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"
)

func archive(t *testing.T, state []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	meta := Meta{ClusterID: "c1", ServerID: "s1", Version: "0.3.0", Index: 42, Term: 3, Time: time.Unix(1700000000, 0).UTC(), StateSize: int64(len(state))}
	if err := Write(&buf, meta, bytes.NewReader(state)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	state := make([]byte, 300_000)
	if _, err := rand.Read(state); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	meta, err := Read(bytes.NewReader(archive(t, state)), &out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), state) || meta.Index != 42 || meta.Term != 3 || meta.ClusterID != "c1" || meta.Format != Format {
		t.Fatalf("read back meta %+v and %d bytes of state", meta, out.Len())
	}
}

func TestWriteRefusesAShortState(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, Meta{StateSize: 10}, strings.NewReader("short")); err == nil {
		t.Fatal("Write accepted 5 bytes of state for a size of 10")
	}
}

// TestReadRefusesDamage: every kind of damage is refused, naming it.
func TestReadRefusesDamage(t *testing.T) {
	state := bytes.Repeat([]byte("drover state "), 5000)
	good := archive(t, state)
	flip := func(at int) []byte {
		b := bytes.Clone(good)
		b[at] ^= 0x10
		return b
	}
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "not gzip"},
		{"foreign", []byte("PK\x03\x04 this is a zip file, not ours"), "not gzip"},
		{"truncated in the middle", good[:len(good)/2], "cut short"},
		{"truncated trailer", good[:len(good)-4], ""},
		{"bit flipped early", flip(len(good) / 3), ""},
		{"bit flipped late", flip(len(good) - 12), ""},
		{"trailing garbage", append(bytes.Clone(good), "extra"...), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tc.file), &bytes.Buffer{})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read = %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
}
