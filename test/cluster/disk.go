package cluster

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// Paths inside a server's data dir, for DamageFile.
const (
	// ServerIDFile holds the server's raft id.
	ServerIDFile = "server-id"
	// RaftDB is the bbolt file holding the raft log and stable store.
	RaftDB = "raft/raft.db"
	// SnapshotsDir holds raft's snapshots, one directory each.
	SnapshotsDir = "raft/snapshots"
	// fillerFile is what FillDataDir writes.
	fillerFile = "harness-filler"
)

// errNotPermitted: this process may not mount file systems.
var errNotPermitted = errors.New("mounting is not permitted")

// TmpfsDataDir gives servers a data dir of their own file system: a tmpfs
// of size bytes, mounted on the data dir before the first start and
// unmounted (lazily, like umount -l) when the test ends, whether it passed
// or not. servers are numbers as in ServerArgs (1 is s1); none means every
// server, including those added with AddServer. FillDataDir and
// FreeDataDir work only on such data dirs. The test is skipped, saying why,
// where the process may not mount.
func TmpfsDataDir(size int64, servers ...int) Option {
	return func(o *options) {
		if o.tmpfs == nil {
			o.tmpfs = make(map[int]int64)
		}
		if len(servers) == 0 {
			o.tmpfs[0] = size
		}
		for _, n := range servers {
			o.tmpfs[n] = size
		}
	}
}

// tmpfsSize is the tmpfs size for server n, or 0 for none.
func (o *options) tmpfsSize(n int) int64 {
	if size, ok := o.tmpfs[n]; ok {
		return size
	}
	return o.tmpfs[0]
}

// mountDataDir mounts the tmpfs of a new server on its data dir.
func (c *Cluster) mountDataDir(s *Server, size int64) {
	c.t.Helper()
	if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		c.t.Fatal(err)
	}
	err := mountTmpfs(s.dataDir, size)
	if errors.Is(err, errNotPermitted) {
		c.t.Skipf("tmpfs data dir for %s: %v", s.name, err)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	s.mounted = true
	c.mu.Lock()
	c.mounts = append(c.mounts, s.dataDir)
	c.mu.Unlock()
	c.t.Logf("cluster: mounted a tmpfs of %d bytes on the data dir of %s", size, s.name)
}

// unmountAll detaches every tmpfs the harness mounted. It runs after the
// processes are killed, and before the temporary directory is removed.
func (c *Cluster) unmountAll() {
	c.mu.Lock()
	mounts := c.mounts
	c.mounts = nil
	c.mu.Unlock()
	for _, dir := range mounts {
		if err := unmount(dir); err != nil {
			c.t.Errorf("cluster: %v", err)
		}
	}
}

// FreeSpace returns the bytes free to an unprivileged writer on the file
// system of the server's data dir.
func (s *Server) FreeSpace() int64 {
	t := s.c.t
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.dataDir, &st); err != nil {
		t.Fatalf("statfs of the data dir of %s: %v", s, err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// FillDataDir fills the file system of the server's data dir (a tmpfs of
// TmpfsDataDir) with a filler file until at most leave bytes are free, and
// returns the bytes free afterwards. The server may be running. Repeated
// calls grow the same filler; FreeDataDir removes it.
func (s *Server) FillDataDir(leave int64) int64 {
	t := s.c.t
	t.Helper()
	if !s.mounted {
		t.Fatalf("fill the data dir of %s: not a tmpfs of the harness (use TmpfsDataDir); refusing to fill another file system", s)
	}
	f, err := os.OpenFile(filepath.Join(s.dataDir, fillerFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	chunk := make([]byte, 1<<20)
	for {
		want := s.FreeSpace() - leave
		if want <= 0 {
			break
		}
		n := int64(len(chunk))
		if want < n {
			n = want
		}
		if _, err := f.Write(chunk[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatalf("fill the data dir of %s: %v", s, err)
		}
	}
	free := s.FreeSpace()
	t.Logf("cluster: filled the data dir of %s; %d bytes free", s, free)
	return free
}

// FreeDataDir removes the filler of FillDataDir, if any.
func (s *Server) FreeDataDir() {
	t := s.c.t
	t.Helper()
	if err := os.Remove(filepath.Join(s.dataDir, fillerFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("free the data dir of %s: %v", s, err)
	}
	t.Logf("cluster: freed the data dir of %s; %d bytes free", s, s.FreeSpace())
}

// Damage changes a file the way a failing disk, a crash in the middle of a
// copy or a careless operator might. Apply it with Server.DamageFile.
type Damage struct {
	what  string
	apply func(path string) error
}

// String describes the damage.
func (d Damage) String() string { return d.what }

// TruncateTo cuts a file to size bytes.
func TruncateTo(size int64) Damage {
	return Damage{what: fmt.Sprintf("truncate to %d bytes", size), apply: func(path string) error {
		return os.Truncate(path, size)
	}}
}

// CutTail cuts the last n bytes off a file.
func CutTail(n int64) Damage {
	return Damage{what: fmt.Sprintf("cut the last %d bytes", n), apply: func(path string) error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		return os.Truncate(path, max(fi.Size()-n, 0))
	}}
}

// FlipBitAt flips the lowest bit of the byte at offset; a negative offset
// counts from the end (-1 is the last byte).
func FlipBitAt(offset int64) Damage {
	return Damage{what: fmt.Sprintf("flip a bit at offset %d", offset), apply: func(path string) error {
		return rewrite(path, func(data []byte) error {
			i := offset
			if i < 0 {
				i += int64(len(data))
			}
			if i < 0 || i >= int64(len(data)) {
				return fmt.Errorf("offset %d outside the file's %d bytes", offset, len(data))
			}
			data[i] ^= 1
			return nil
		})
	}}
}

// FlipBitsIn flips one bit in the middle of every occurrence of pattern in
// a file, and fails if there is none. Every occurrence, because a
// copy-on-write file such as bbolt's keeps stale copies of a page beside
// the live one.
func FlipBitsIn(pattern []byte) Damage {
	return Damage{what: fmt.Sprintf("flip a bit in every occurrence of %q", pattern), apply: func(path string) error {
		return rewrite(path, func(data []byte) error {
			found := 0
			for i := 0; ; {
				j := bytes.Index(data[i:], pattern)
				if j < 0 {
					break
				}
				data[i+j+len(pattern)/2] ^= 1
				found++
				i += j + len(pattern)
			}
			if found == 0 {
				return fmt.Errorf("%q does not occur", pattern)
			}
			return nil
		})
	}}
}

// Overwrite replaces a file's content.
func Overwrite(data []byte) Damage {
	return Damage{what: fmt.Sprintf("overwrite with %q", data), apply: func(path string) error {
		return os.WriteFile(path, data, 0o600)
	}}
}

// Remove deletes a file.
func Remove() Damage {
	return Damage{what: "remove", apply: os.Remove}
}

// rewrite reads a file, changes its bytes in memory and writes them back in
// place (same inode, same size).
func rewrite(path string, change func([]byte) error) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if err := change(data); err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	return f.Sync()
}

// DamageFile applies d to the file at rel (a path inside the data dir, such
// as RaftDB) of a server that is not running.
func (s *Server) DamageFile(rel string, d Damage) {
	t := s.c.t
	t.Helper()
	if s.Running() {
		t.Fatalf("damage %s of %s: the server is running", rel, s)
	}
	if s.dataDir == "" {
		t.Fatalf("damage %s of %s: dev servers have no data dir of the harness's", rel, s)
	}
	if err := d.apply(filepath.Join(s.dataDir, rel)); err != nil {
		t.Fatalf("damage %s of %s (%s): %v", rel, s, d, err)
	}
	t.Logf("cluster: damaged %s of %s: %s", rel, s, d)
}

// Snapshots returns the paths, relative to the data dir, of the
// directories of the server's raft snapshots, newest (highest term, then
// index) first. Directories without a readable meta.json (a snapshot being
// written) are left out.
func (s *Server) Snapshots() []string {
	t := s.c.t
	t.Helper()
	dir := filepath.Join(s.dataDir, SnapshotsDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	type snap struct {
		name        string
		term, index uint64
	}
	var snaps []snap
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "meta.json"))
		if err != nil {
			continue // a snapshot being written, or not a snapshot
		}
		var meta struct{ Term, Index uint64 }
		if err := json.Unmarshal(data, &meta); err != nil {
			continue
		}
		snaps = append(snaps, snap{e.Name(), meta.Term, meta.Index})
	}
	slices.SortFunc(snaps, func(a, b snap) int {
		return cmp.Or(cmp.Compare(b.term, a.term), cmp.Compare(b.index, a.index))
	})
	out := make([]string, len(snaps))
	for i, sn := range snaps {
		out[i] = filepath.Join(SnapshotsDir, sn.name)
	}
	return out
}
