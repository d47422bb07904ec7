package test_test

// Import-direction rules of docs/architecture.md ("Packages"), enforced on the real tree.
//
// Only the non-test imports of each package are checked (go list .Imports
// excludes _test.go files): tests may reach further down or sideways, e.g.
// scheduler tests may use fsm/state and any test may use internal/mock.

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// mod is the module path. Patterns below are relative to it: "fsm" is the
// package mod/fsm, "proto/..." is mod/proto and everything under it, "..." is
// every package of ours. Third-party patterns (in never) are full import paths
// with the same "/..." convention.
const mod = "github.com/droverhq/drover"

// The rules, as tables so they read at a glance. Columns are separated by
// "|", patterns within a column by spaces; "-" is the empty list.

// importTable: a package matching the first column may import, of ours, only
// packages matching the second ("-" = nothing of ours, "..." = anything), and
// never a third-party package matching the third. Every row matching a
// package applies.
const importTable = `
package        | may import (of ours) only                                | never (third-party)
proto/...      | -                                                        | -
fsm/events     | proto/...                                                | -
fsm/state      | proto/... fsm/events                                     | -
fsm            | fsm/state fsm/events proto/...                           | -
scheduler/...  | proto/... scheduler/...                                  | github.com/hashicorp/go-memdb/... github.com/hashicorp/raft/... google.golang.org/grpc/...
worker/...     | scheduler/... proto/... worker/... internal/backoff      | -
rpc/...        | fsm/state fsm/events proto/... rpc/... internal/version internal/acl internal/audit internal/rounds internal/groupcommit | -
internal/acl   | -                                                        | google.golang.org/grpc/... github.com/hashicorp/raft/... github.com/hashicorp/go-memdb/...
internal/audit | -                                                        | google.golang.org/grpc/... github.com/hashicorp/raft/...
internal/backup | -                                                       | google.golang.org/grpc/... github.com/hashicorp/raft/...
server/...     | ...                                                      | -
server/httpapi | rpc internal/acl server/httpapi/ui proto/...             | -
server/httpapi/ui | -                                                     | -
internal/tlsconfig | -                                                    | -
internal/backoff   | -                                                    | google.golang.org/grpc/... github.com/hashicorp/raft/...
internal/rounds    | -                                                    | google.golang.org/grpc/... github.com/hashicorp/raft/...
internal/groupcommit | -                                                  | google.golang.org/grpc/... github.com/hashicorp/raft/...
internal/testcerts | internal/tlsconfig                                   | -
internal/simagent  | proto/... rpc internal/backoff                       | -
internal/loadgen   | proto/... rpc internal/simagent                      | -
`

// The rpc row means rpc never imports server, worker or fsm (the package);
// the policy language (internal/acl) and the audit file (internal/audit)
// know nothing of gRPC, raft or the state store;
// the HTTP server only translates to the gRPC services, and the web UI's
// assets and handler know nothing of drover (docs/architecture.md, "Packages");
// the server row is narrowed by importedByTable (no cmd, test, internal/mock).
// rpc takes its TLS credentials and the server-identity check from the
// server as gRPC credentials and a function, so it does not import
// internal/tlsconfig; tlsconfig itself knows nothing of drover's packages.

// importedByTable: a package of ours matching the first column may be
// imported, by non-test code, only by packages matching the second. (Any
// _test.go file may import internal/mock, internal/testserver and
// internal/testcerts; go list .Imports does not show test imports.)
// internal/testcerts writes throwaway certificates: nothing but tests may
// use it. The simulated agents and the load driver are clients of the
// servers: they reach them only over the API (rpc for its codec), and
// nothing of the servers' own may depend on them.
const importedByTable = `
package        | may be imported only by
cmd/...        | cmd/...
test/...       | test/...
internal/mock  | test/... internal/testserver
internal/testserver | test/...
internal/testcerts  | test/... internal/testserver
internal/simagent   | cmd/... test/... internal/loadgen
internal/loadgen    | cmd/... test/...
internal/acltest    | test/...
`

type importRule struct {
	pkg   string
	only  []string // importRules: allowed of ours; importedByRules: allowed importers
	never []string // importRules only
}

var (
	importRules     = parseTable(importTable, 3)
	importedByRules = parseTable(importedByTable, 2)
)

// parseTable parses one of the tables above, skipping its header row.
func parseTable(table string, cols int) []importRule {
	var rules []importRule
	lines := strings.Split(strings.TrimSpace(table), "\n")
	for _, line := range lines[1:] {
		f := strings.Split(line, "|")
		if len(f) != cols {
			panic(fmt.Sprintf("rule table: want %d columns in %q", cols, line))
		}
		list := func(s string) []string {
			if strings.TrimSpace(s) == "-" {
				return []string{}
			}
			return strings.Fields(s)
		}
		r := importRule{pkg: strings.TrimSpace(f[0]), only: list(f[1])}
		if cols == 3 {
			r.never = list(f[2])
		}
		rules = append(rules, r)
	}
	return rules
}

// match reports whether the import path p matches pattern pat (full paths,
// "/..." suffix = the path itself and everything below it).
func match(pat, p string) bool {
	if pat == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pat, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pat
}

// ours returns p relative to the module ("" for the module root package) and
// whether p belongs to the module at all.
func ours(p string) (string, bool) {
	if p == mod {
		return "", true
	}
	rel, ok := strings.CutPrefix(p, mod+"/")
	return rel, ok
}

func matchAny(pats []string, p string) bool {
	for _, pat := range pats {
		if match(pat, p) {
			return true
		}
	}
	return false
}

// allowed reports whether non-test code of package importer (full import
// path) may import imported (full import path), and if not, which rule says
// so.
func allowed(importer, imported string) (bool, string) {
	from, fromOurs := ours(importer)
	if !fromOurs {
		return true, ""
	}
	to, toOurs := ours(imported)
	if toOurs {
		for _, r := range importedByRules {
			if match(r.pkg, to) && !matchAny(r.only, from) {
				return false, fmt.Sprintf("%s may be imported only by %s (and by _test.go files)", r.pkg, strings.Join(r.only, ", "))
			}
		}
	}
	for _, r := range importRules {
		if !match(r.pkg, from) {
			continue
		}
		if toOurs && !matchAny(r.only, to) {
			if len(r.only) == 0 {
				return false, fmt.Sprintf("%s may import nothing of ours", r.pkg)
			}
			return false, fmt.Sprintf("%s may import only %s of ours", r.pkg, strings.Join(r.only, ", "))
		}
		if !toOurs && matchAny(r.never, imported) {
			return false, fmt.Sprintf("%s must never import %s", r.pkg, strings.Join(r.never, ", "))
		}
	}
	return true, ""
}

func TestImportRulesSelfTest(t *testing.T) {
	m := func(p string) string { return mod + "/" + p }
	cases := []struct {
		importer, imported string
		want               bool
	}{
		{m("proto/drover/v1"), "google.golang.org/grpc", true},
		{m("proto/drover/v1"), m("fsm/state"), false},
		{m("proto/drover/v1"), m("internal/version"), false},
		{m("fsm/events"), m("proto/drover/v1"), true},
		{m("fsm/events"), m("fsm/state"), false},
		{m("fsm/events"), m("fsm"), false},
		{m("fsm/state"), m("fsm/events"), true},
		{m("fsm/state"), "github.com/hashicorp/go-memdb", true},
		{m("fsm/state"), m("fsm"), false},
		{m("fsm"), m("fsm/state"), true},
		{m("fsm"), "github.com/hashicorp/raft", true},
		{m("fsm"), m("server/raftnode"), false},
		{m("fsm"), m("internal/mock"), false},
		{m("scheduler"), m("proto/drover/v1"), true},
		{m("scheduler"), m("scheduler/fit"), true},
		{m("scheduler/fit"), "math", true},
		{m("scheduler"), m("fsm/state"), false},
		{m("scheduler"), "github.com/hashicorp/go-memdb", false},
		{m("scheduler/fit"), "google.golang.org/grpc/codes", false},
		{m("scheduler"), "github.com/hashicorp/raft", false},
		{m("worker"), m("scheduler/fit"), true},
		{m("worker/pool"), m("worker"), true},
		{m("worker"), m("fsm/state"), false},
		{m("worker"), m("server"), false},
		{m("rpc"), m("fsm/state"), true},
		{m("rpc"), m("fsm/events"), true},
		{m("rpc/interceptors"), m("rpc"), true},
		{m("rpc"), m("internal/version"), true},
		{m("rpc"), m("server"), false},
		{m("rpc"), m("server/broker"), false},
		{m("rpc"), m("worker"), false},
		{m("rpc"), m("fsm"), false},
		{m("rpcx"), m("server"), true}, // "rpc/..." stops at a path boundary
		{m("server"), m("fsm"), true},
		{m("server/broker"), m("scheduler"), true},
		{m("server"), m("rpc"), true},
		{m("server"), m("cmd/drover"), false},
		{m("server"), m("test"), false},
		{m("server"), m("internal/mock"), false},
		{m("test"), m("internal/mock"), true},
		{m("server"), m("internal/testserver"), false},
		{m("test"), m("internal/testserver"), true},
		{m("test/e2e"), m("test"), true},
		{m("test"), m("cmd/drover"), false},
		{m("cmd/drover"), m("server"), true},
		{m("cmd/drover"), m("internal/mock"), false},
		{m("cmd/drover"), m("test"), false},
		{m("internal/version"), m("internal/mock"), false},
		{m("server"), m("internal/tlsconfig"), true},
		{m("cmd/drover/internal/cli"), m("internal/tlsconfig"), true},
		{m("rpc"), m("internal/tlsconfig"), false},
		{m("internal/tlsconfig"), m("proto/drover/v1"), false},
		{m("internal/tlsconfig"), "google.golang.org/grpc/credentials", true},
		{m("test/cluster"), m("internal/testcerts"), true},
		{m("internal/testcerts"), m("internal/tlsconfig"), true},
		{m("server"), m("internal/testcerts"), false},
		{m("cmd/drover"), m("internal/testcerts"), false},
		{"example.com/other", m("internal/mock"), true}, // not ours: not our business
	}
	for _, c := range cases {
		got, why := allowed(c.importer, c.imported)
		if got != c.want {
			t.Errorf("allowed(%s -> %s) = %v (%s), want %v", c.importer, c.imported, got, why, c.want)
		}
	}
}

// moduleRoot returns the directory holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("go env GOMOD: not inside a module")
	}
	return filepath.Dir(gomod)
}

func TestImportDirection(t *testing.T) {
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	var bad []string
	pkgs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkgs++
		importer := fields[0]
		for _, imported := range fields[1:] {
			if ok, why := allowed(importer, imported); !ok {
				bad = append(bad, fmt.Sprintf("  %s -> %s\n      rule: %s", importer, imported, why))
			}
		}
	}
	if pkgs == 0 {
		t.Fatal("go list ./... listed no packages")
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("%d forbidden import(s) (docs/architecture.md, Packages: arrows point down the table, never back up):\n%s",
			len(bad), strings.Join(bad, "\n"))
	}
}

// The fsm packages must be deterministic: every server applying the same raft
// log must end up with the same state, so no clock, randomness or environment.
var fsmDirs = []string{"fsm", "fsm/state", "fsm/events"}

// forbiddenUses maps an import path to the selectors on it that fsm code must
// not use; nil means any use of the package.
var forbiddenUses = map[string][]string{
	"time":                   {"Now", "Since", "Until"},
	"math/rand":              nil,
	"math/rand/v2":           nil,
	"crypto/rand":            nil,
	"os":                     {"Getenv", "LookupEnv", "Environ"},
	"github.com/google/uuid": {"New", "NewString", "NewRandom", "NewV7", "NewUUID"}, // random or clock based
}

func TestFSMDeterministic(t *testing.T) {
	root := moduleRoot(t)
	var bad []string
	for _, dir := range fsmDirs {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			rel, _ := filepath.Rel(root, path)
			bad = append(bad, nondeterministicUses(t, path, rel)...)
		}
	}
	if len(bad) > 0 {
		t.Errorf("fsm packages must be deterministic (same log => same state on every server); found:\n  %s\n"+
			"Take times, random IDs and settings from the raft log entry or from configuration instead.",
			strings.Join(bad, "\n  "))
	}
}

// nondeterministicUses parses one file and returns a line per forbidden
// selector on an imported package (comments and strings cannot match).
func nondeterministicUses(t *testing.T, path, rel string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", rel, err)
	}
	var bad []string
	names := map[string]string{} // local package name -> import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := forbiddenUses[p]; !ok {
			continue
		}
		name := pkgName(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		switch name {
		case "_":
			continue
		case ".":
			bad = append(bad, fmt.Sprintf("%s: dot-import of %q (cannot be checked; import it by name)", fset.Position(imp.Pos()), p))
			continue
		}
		names[name] = p
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok || x.Obj != nil { // x.Obj != nil: a local variable, not the package
			return true
		}
		p, ok := names[x.Name]
		if !ok {
			return true
		}
		sels := forbiddenUses[p]
		if sels == nil || slices.Contains(sels, sel.Sel.Name) {
			pos := fset.Position(sel.Pos())
			pos.Filename = rel
			bad = append(bad, fmt.Sprintf("%s: %s.%s (%s)", pos, x.Name, sel.Sel.Name, p))
		}
		return true
	})
	return bad
}

// pkgName is the default name of an imported package: the last path element,
// skipping a major-version suffix (math/rand/v2 -> rand).
func pkgName(p string) string {
	parts := strings.Split(p, "/")
	last := parts[len(parts)-1]
	if len(parts) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		return parts[len(parts)-2]
	}
	return last
}
