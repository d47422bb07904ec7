package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/droverhq/drover/fsm"
	"github.com/droverhq/drover/internal/backup"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// operatorSnapshotCommand groups the backup commands.
func operatorSnapshotCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator snapshot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ffcli.Command{
		Name:       "snapshot",
		ShortUsage: "drover operator snapshot <save|inspect|restore> [flags] FILE",
		ShortHelp:  "Back the cluster's state up, check a backup, restore one.",
		FlagSet:    fs,
		Subcommands: []*ffcli.Command{
			snapshotSaveCommand(stdout, stderr),
			snapshotInspectCommand(stdout, stderr),
			snapshotRestoreCommand(stdout, stderr),
		},
		Exec: groupExec(),
	}
}

func snapshotSaveCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator snapshot save", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, false)
	stale := fs.Bool("stale", false, "take the snapshot from the server called rather than the leader (works without a leader; may be behind)")
	return &ffcli.Command{
		Name:       "save",
		ShortUsage: "drover operator snapshot save [flags] FILE",
		ShortHelp:  "Save a consistent copy of the whole state to FILE.",
		LongHelp: "The file is written whole or not at all: into FILE.tmp, checked, synced,\n" +
			"then renamed. -timeout bounds the whole transfer; raise it for a large state.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one file to write")
			}
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			meta, err := saveSnapshot(ctx, droverv1.NewOperatorServiceClient(s.conn), *stale, args[0])
			if err != nil {
				return s.fail(ctx, "saving a snapshot", err)
			}
			_, err = fmt.Fprintf(stdout, "Saved snapshot of index %d (term %d, cluster %s) to %s\n", meta.Index, meta.Term, meta.ClusterID, args[0])
			return err
		},
	}
}

// saveSnapshot streams a backup into path.tmp, checks it whole, syncs it
// and renames it to path: path is a complete, verified backup or is not
// touched.
func saveSnapshot(ctx context.Context, c droverv1.OperatorServiceClient, stale bool, path string) (backup.Meta, error) {
	var meta backup.Meta
	stream, err := c.SnapshotSave(ctx, &droverv1.SnapshotSaveRequest{Stale: stale})
	if err != nil {
		return meta, err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return meta, err
	}
	defer os.Remove(tmp) // a no-op once renamed
	if err := receiveChunks(stream, f); err != nil {
		_ = f.Close()
		return meta, err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return meta, fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return meta, fmt.Errorf("close %s: %w", tmp, err)
	}
	if meta, err = verifyFile(tmp); err != nil {
		return meta, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return meta, err
	}
	return meta, syncDir(filepath.Dir(path))
}

func receiveChunks(stream droverv1.OperatorService_SnapshotSaveClient, w io.Writer) error {
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := w.Write(chunk.GetData()); err != nil {
			return err
		}
	}
}

// verifyFile checks a backup file whole and returns its metadata.
func verifyFile(path string) (backup.Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return backup.Meta{}, err
	}
	defer f.Close()
	meta, err := backup.Read(f, io.Discard)
	if err != nil {
		return meta, fmt.Errorf("%s: %w", path, err)
	}
	return meta, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// snapshotInspection is what inspect prints with -json.
type snapshotInspection struct {
	Meta   backup.Meta      `json:"meta"`
	Tables []inspectedTable `json:"tables"`
}

type inspectedTable struct {
	Table   string `json:"table"`
	Records int    `json:"records"`
	Bytes   int64  `json:"bytes"`
}

func snapshotInspectCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator snapshot inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the metadata and counts as JSON")
	return &ffcli.Command{
		Name:       "inspect",
		ShortUsage: "drover operator snapshot inspect [-json] FILE",
		ShortHelp:  "Check a backup file's checksums and show what it holds. Works offline.",
		FlagSet:    fs,
		Exec: func(_ context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one file to inspect")
			}
			in, err := inspectFile(args[0])
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSONObject(stdout, in)
			}
			return printInspection(stdout, in)
		},
	}
}

// inspectFile verifies a backup and counts the records of its state.
func inspectFile(path string) (*snapshotInspection, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	type counted struct {
		tables []fsm.TableCount
		err    error
	}
	done := make(chan counted, 1)
	go func() {
		_, tables, err := fsm.InspectSnapshot(pr)
		_, _ = io.Copy(io.Discard, pr) // let Read finish whatever happened
		done <- counted{tables, err}
	}()
	meta, readErr := backup.Read(f, pw)
	pw.CloseWithError(readErr)
	res := <-done
	if readErr != nil {
		return nil, fmt.Errorf("%s: %w", path, readErr)
	}
	if res.err != nil {
		return nil, fmt.Errorf("%s: state: %w", path, res.err)
	}
	in := &snapshotInspection{Meta: meta}
	for _, t := range res.tables {
		in.Tables = append(in.Tables, inspectedTable{Table: t.Table, Records: t.Records, Bytes: t.Bytes})
	}
	return in, nil
}

func printInspection(w io.Writer, in *snapshotInspection) error {
	m := in.Meta
	if err := printFields(w, []field{
		{"Cluster ID", m.ClusterID},
		{"Server ID", m.ServerID},
		{"Index", strconv.FormatUint(m.Index, 10)},
		{"Term", strconv.FormatUint(m.Term, 10)},
		{"Drover Version", m.Version},
		{"Time", m.Time.Local().Format(time.RFC3339)},
		{"State Size", strconv.FormatInt(m.StateSize, 10)},
		{"Checksums", "verified"},
	}); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "Table\tRecords\tBytes")
	for _, t := range in.Tables {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", t.Table, t.Records, t.Bytes)
	}
	return tw.Flush()
}

func snapshotRestoreCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover operator snapshot restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, false)
	return &ffcli.Command{
		Name:       "restore",
		ShortUsage: "drover operator snapshot restore [flags] FILE",
		ShortHelp:  "Replace the whole cluster state with a backup's. Needs a management token.",
		LongHelp: "The file is checked here, then sent to the leader, which checks it again\n" +
			"before anything changes. Every server converges on the restored state.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give exactly one backup file")
			}
			meta, err := verifyFile(args[0])
			if err != nil {
				return err
			}
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			resp, err := sendSnapshot(ctx, droverv1.NewOperatorServiceClient(s.conn), args[0])
			if err != nil {
				return s.fail(ctx, "restoring "+args[0], err)
			}
			_, err = fmt.Fprintf(stdout, "Restored the backup of index %d (cluster %s); the state now starts at index %d\n",
				meta.Index, meta.ClusterID, resp.GetIndex())
			return err
		},
	}
}

// sendSnapshot streams a backup file to SnapshotRestore.
func sendSnapshot(ctx context.Context, c droverv1.OperatorServiceClient, path string) (*droverv1.SnapshotRestoreResponse, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	stream, err := c.SnapshotRestore(ctx)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 256<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if sendErr := stream.Send(&droverv1.SnapshotChunk{Data: bytes.Clone(buf[:n])}); sendErr != nil {
				break // the server's answer says why
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return stream.CloseAndRecv()
}
