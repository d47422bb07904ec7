//go:build linux

package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of the given size on a fresh directory, or skips
// the test: only root (CAP_SYS_ADMIN) may mount, and a full filesystem is the
// only honest way to make write(2) fail.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a %s tmpfs to fill (needs root or CAP_SYS_ADMIN): %v", size, err)
	}
	// Runs before TempDir's own cleanup, which removes dir.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func TestWriteOnFullDisk(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"no sync", nil},
		{"sync", []Option{WithSync(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := mountTmpfs(t, "64k")
			filler := filepath.Join(dir, "filler")
			if err := os.WriteFile(filler, make([]byte, 32<<10), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "audit.log")
			l := openLog(t, path, tc.opts...)
			t.Cleanup(func() { l.Close() }) // before the unmount

			// Lines of about 1.5 KB: tmpfs allocates 4 KB pages, so the
			// failing write is usually a partial one that must be cut off.
			e := Entry{Accessor: "a", Method: "/m", Code: "Internal", Message: strings.Repeat("x", 1500)}
			var err error
			written := 0
			for ; written < 100; written++ {
				if err = l.Write(e); err != nil {
					break
				}
			}
			if err == nil {
				t.Fatal("100 writes of 1.5 KB fit in a 64 KB filesystem")
			}
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Write = %v, want ENOSPC naming %s", err, path)
			}
			// A second failure must not leave a fragment either.
			if err := l.Write(e); err == nil {
				t.Fatal("Write on a full disk succeeded")
			}
			if got := len(readLines(t, path)); got != written {
				t.Fatalf("%d whole lines for %d successful writes", got, written)
			}

			// Space comes back: writing resumes, and the file stays whole.
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			if err := l.Write(e); err != nil {
				t.Fatalf("Write after freeing space: %v", err)
			}
			if got := len(readLines(t, path)); got != written+1 {
				t.Fatalf("%d lines, want %d", got, written+1)
			}
		})
	}
}
