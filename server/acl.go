package server

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/droverhq/drover/internal/audit"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// aclResetFileName is the file, in the data dir, where an operator writes
// the reset index to bootstrap ACLs again.
const aclResetFileName = "acl-bootstrap-reset"

// aclResetFile is this server's ACL bootstrap reset file.
func (s *Server) aclResetFile() string { return filepath.Join(s.dataDir, aclResetFileName) }

// openAuditLog opens -audit-log, if set.
func (s *Server) openAuditLog() error {
	if s.cfg.AuditLog == "" {
		return nil
	}
	l, err := audit.Open(s.cfg.AuditLog)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	s.audit = l
	return nil
}

// auditLog is the audit trail for the RPC server, or nil.
func (s *Server) auditLog() rpc.AuditLog {
	if s.audit == nil {
		return nil
	}
	return s.audit
}

func (s *Server) closeAuditLog() {
	if s.audit == nil {
		return
	}
	if err := s.audit.Close(); err != nil {
		s.logger.Warn("closing the audit log", "file", s.cfg.AuditLog, "err", err)
	}
}

// ReopenAuditLog closes the audit log and opens its path again, so that
// logrotate can rename it and signal the server (SIGHUP). Without
// -audit-log it does nothing.
func (s *Server) ReopenAuditLog() error {
	if s.audit == nil {
		return nil
	}
	if err := s.audit.Reopen(); err != nil {
		return fmt.Errorf("reopen audit log %s: %w", s.cfg.AuditLog, err)
	}
	s.logger.Info("audit log reopened", "file", s.cfg.AuditLog)
	return nil
}

// maxExpiredTokens bounds the tokens one garbage collection entry deletes.
const maxExpiredTokens = 1000

// collectExpiredTokens deletes the tokens that have expired. They are
// refused from the moment they expire; this only keeps them from piling
// up.
func (g *garbageCollector) collectExpiredTokens(ctx context.Context) (int, error) {
	if !g.s.cfg.ACLEnabled {
		return 0, nil
	}
	expired := g.s.state.Snapshot().ExpiredACLTokens(time.Now(), maxExpiredTokens)
	if len(expired) == 0 {
		return 0, nil
	}
	if _, _, err := g.s.Apply(ctx, droverv1.MessageTypeACLToken, &droverv1.ACLTokenEntry{Deletes: expired}); err != nil {
		return 0, fmt.Errorf("delete %d expired ACL tokens: %w", len(expired), err)
	}
	return len(expired), nil
}
