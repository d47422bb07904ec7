// Package backup is the file format of operator snapshots: a gzip-compressed
// tar holding meta.json (what the snapshot is), state.bin (the state store
// as raft snapshots hold it) and SHA256SUMS (a SHA-256 of each), in that
// order. Ordinary tools read it (tar tzf), and every part is checked before
// anything trusts it. It knows nothing of drover's state: state.bin is
// bytes here.
package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Names of the archive's parts.
const (
	metaName  = "meta.json"
	stateName = "state.bin"
	sumsName  = "SHA256SUMS"
)

// Format is the version of the archive layout, in every Meta.
const Format = 1

// maxMetaSize bounds meta.json and SHA256SUMS, so that a hostile file
// cannot make a reader allocate without limit.
const maxMetaSize = 1 << 20

// ErrInvalid marks a file that is not a whole, intact drover snapshot.
var ErrInvalid = errors.New("not a valid drover snapshot")

// Meta describes a snapshot.
type Meta struct {
	Format    int       `json:"format"`
	ClusterID string    `json:"cluster_id"`
	ServerID  string    `json:"server_id"`
	Version   string    `json:"drover_version"`
	Index     uint64    `json:"index"`
	Term      uint64    `json:"term"`
	Time      time.Time `json:"time"`
	// StateSize is the size of state.bin in bytes.
	StateSize int64 `json:"state_size"`
}

// Write writes the archive of meta and the state read from state, which
// must hold exactly meta.StateSize bytes, to w. It streams: the state is
// never held in memory.
func Write(w io.Writer, meta Meta, state io.Reader) error {
	meta.Format = Format
	metaJSON, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("encode snapshot metadata: %w", err)
	}
	// The fastest level: a backup of a large state is bound by compression,
	// and the state compresses well even so.
	gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return fmt.Errorf("snapshot compression: %w", err)
	}
	tw := tar.NewWriter(gz)
	sums := map[string]string{metaName: sum(metaJSON)}
	if err := writeEntry(tw, metaName, int64(len(metaJSON)), bytes.NewReader(metaJSON), meta.Time); err != nil {
		return err
	}
	h := sha256.New()
	if err := writeEntry(tw, stateName, meta.StateSize, io.TeeReader(state, h), meta.Time); err != nil {
		return err
	}
	sums[stateName] = hex.EncodeToString(h.Sum(nil))
	list := sumList(sums)
	if err := writeEntry(tw, sumsName, int64(len(list)), strings.NewReader(list), meta.Time); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close snapshot archive: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("close snapshot compression: %w", err)
	}
	return nil
}

func writeEntry(tw *tar.Writer, name string, size int64, r io.Reader, mod time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Size: size, Mode: 0o600, ModTime: mod, Typeflag: tar.TypeReg}); err != nil {
		return fmt.Errorf("snapshot part %s: %w", name, err)
	}
	n, err := io.Copy(tw, r)
	if err != nil {
		return fmt.Errorf("snapshot part %s after %d bytes: %w", name, n, err)
	}
	if n != size {
		return fmt.Errorf("snapshot part %s: %d bytes, want %d", name, n, size)
	}
	return nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// sumList formats SHA256SUMS as sha256sum(1) does, sorted by name.
func sumList(sums map[string]string) string {
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", sums[n], n)
	}
	return b.String()
}
