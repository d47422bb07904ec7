package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/droverhq/drover/server/raftnode"
)

// serverIDFile is the file in the data dir that holds the server's raft id.
const serverIDFile = "server-id"

// maxServerIDLen bounds a server id.
const maxServerIDLen = 128

// openDataDir returns the data dir, creating it (or a temporary one in dev
// mode) with owner-only permissions.
func openDataDir(cfg Config) (string, error) {
	if cfg.Dev && cfg.DataDir == "" {
		dir, err := os.MkdirTemp("", "drover-dev-")
		if err != nil {
			return "", fmt.Errorf("create dev data dir: %w", err)
		}
		return dir, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return "", fmt.Errorf("create data dir %s: %w", cfg.DataDir, err)
	}
	return cfg.DataDir, nil
}

// validServerID checks the form of a server id: 1 to 128 printable
// characters, no spaces.
func validServerID(id string) error {
	if id == "" || len(id) > maxServerIDLen || !utf8.ValidString(id) {
		return fmt.Errorf("%q is not 1 to %d characters of UTF-8", id, maxServerIDLen)
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%q holds a space or an unprintable character", id)
		}
	}
	return nil
}

// serverID returns the id stored in the data dir, storing want (or a new
// random id) there on first start. A data dir belongs to one server: asking
// for another id is an error rather than a second raft identity on the
// same log. A server-id file that is garbled, that disagrees with the id
// raft.db records, or that is missing beside raft state is a
// *raftnode.DamageError naming it.
func serverID(dataDir, want string) (string, error) {
	path := filepath.Join(dataDir, serverIDFile)
	recorded, hasRecord := raftnode.RecordedServerID(dataDir)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		stored := strings.TrimSpace(string(data))
		if err := validServerID(stored); err != nil {
			return "", &raftnode.DamageError{File: path, Problem: "does not hold a valid server id: " + err.Error() + idHint(recorded, hasRecord)}
		}
		if hasRecord && recorded != stored {
			return "", &raftnode.DamageError{File: path, Problem: fmt.Sprintf("says %q but raft.db records server %q", stored, recorded) + idHint(recorded, hasRecord)}
		}
		if want != "" && want != stored {
			return "", fmt.Errorf("data dir %s belongs to server %q, not %q", dataDir, stored, want)
		}
		return stored, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", &raftnode.DamageError{File: path, Problem: "cannot be read", Err: err}
	}
	if want == "" && raftnode.StateExists(dataDir) {
		// A new id would give the log and votes of one server to another.
		return "", &raftnode.DamageError{File: path, Problem: "is missing, but the data dir holds raft state" + idHint(recorded, hasRecord)}
	}
	id := want
	if id == "" {
		id = uuid.NewString()
	}
	if err := writeFileAtomic(path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("store server id: %w", err)
	}
	return id, nil
}

// idHint tells the operator how to put a server-id file right.
func idHint(recorded string, ok bool) string {
	if !ok {
		return "; start with -server-id <id> after removing the file, or with -rebuild-from-peers"
	}
	return fmt.Sprintf("; raft.db records server %q: remove the file and start with -server-id %s, or start with -rebuild-from-peers", recorded, recorded)
}
