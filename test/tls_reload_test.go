package test_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/simagent"
	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/tlsconfig"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/test/cluster"
)

// What a server logs after SIGHUP (server.ReloadTLS).
const (
	logTLSReloaded = "TLS certificates reloaded; new connections use them"
	logTLSRefused  = "TLS files refused; new connections still use the certificates loaded before"
)

// Settings of TestTLSRotation.
const (
	rotationNodes   = 6
	rotationTimeout = 2 * time.Minute
	// probeInterval paces the prober's rounds of new connections (load,
	// not synchronisation: the test waits for rounds to complete).
	probeInterval = 50 * time.Millisecond
)

// TestTLSRotation rotates the certificates of a running 3-server TLS
// cluster with SIGHUP, without restarting anything, while simulated agents
// run allocations and a prober opens a new connection to every server all
// the time: first new certificates of the same CA, then a new CA the
// no-downtime way (a bundle of old and new CA everywhere, then the new
// certificates, then the old CA dropped). The harness's client identity,
// which the agents and the prober share, is rotated along, as agents'
// would be. After each SIGHUP the server's log says what changed, and a
// new connection to its gRPC and raft ports gets the new certificate.
//
// Each step is given time for every agent to heartbeat and for the
// prober to reach every server. No agent call fails (the fleet's failure
// counters stay at zero), every node stays ready and every allocation
// keeps running untouched, and no new connection of the prober fails. A
// server given a damaged key file keeps serving with the certificate it
// had. Then a leadership transfer makes the servers open raft connections
// to each other with the rotated certificates, a write through a follower
// commits everywhere, and no server has logged a certificate error.
// Finally the old CA's certificates are refused both ways.
func TestTLSRotation(t *testing.T) {
	dir := t.TempDir()
	oldCA := writeCerts(t, filepath.Join(dir, "old-ca"))
	// Copies of what the rotation overwrites and the checks need later:
	// the old CA on its own, and a client and server certificate it signed.
	oldCAFile := filepath.Join(dir, "old-ca-only.pem")
	if err := testcerts.WriteBundle(oldCAFile, oldCA.CAFile); err != nil {
		t.Fatal(err)
	}
	oldClient := tlsconfig.Config{CertFile: filepath.Join(dir, "old-client.pem"), KeyFile: filepath.Join(dir, "old-client-key.pem")}
	if _, err := oldCA.WriteClient(oldClient.CertFile, oldClient.KeyFile); err != nil {
		t.Fatal(err)
	}

	// Each server has files of its own, rotated one server at a time.
	files := make([]tlsconfig.Config, 3)
	current := make([]*x509.Certificate, 3) // what each server presents
	opts := []cluster.Option{cluster.TLSCerts(oldCA), cluster.Args("-heartbeat-min-ttl", "1s")}
	for i := range files {
		d := filepath.Join(dir, fmt.Sprintf("s%d", i+1))
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		files[i] = tlsconfig.Config{CAFile: filepath.Join(d, "ca.pem"), CertFile: filepath.Join(d, "server.pem"), KeyFile: filepath.Join(d, "server-key.pem")}
		writeBundle(t, files[i].CAFile, oldCAFile)
		current[i] = writeServerCert(t, oldCA, files[i])
		opts = append(opts, cluster.ServerArgs(i+1, "-tls-ca-file", files[i].CAFile, "-tls-cert-file", files[i].CertFile, "-tls-key-file", files[i].KeyFile))
	}
	started := time.Now()
	c := cluster.New(t, droverBin, 3, opts...)
	ctx := within(t, testContext(t), rotationTimeout)
	leader := c.WaitLeader(ctx)
	servers := c.Servers()
	client := c.ClientTLS()

	fleet := startSimFleet(ctx, t, c, rotationNodes, simAllocs, func(cfg *simagent.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithTransportCredentials(client.ClientCredentials()))
	})
	waitFleetReady(ctx, t, fleet)
	job := mock.Job(rotationNodes)
	if _, err := registerJob(ctx, leader.Conn(), job, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	allocsBefore := allocIDs(waitRunning(ctx, t, leader.Conn(), job.GetId(), rotationNodes))
	statsBefore := fleet.Stats()
	rotationStart := time.Now()
	probes := startProber(ctx, t, servers, client)

	// hangUp sends SIGHUP to server i and waits until it has logged the
	// outcome; then a new connection must get current[i].
	hangUp := func(i int, wantRefused bool) {
		t.Helper()
		s := servers[i]
		reloaded, refused := countLogged(s, logTLSReloaded), countLogged(s, logTLSRefused)
		s.Signal(syscall.SIGHUP)
		poll(ctx, t, fmt.Sprintf("%s logged the outcome of SIGHUP", s), func() (bool, string) {
			return countLogged(s, logTLSReloaded) > reloaded || countLogged(s, logTLSRefused) > refused, "nothing logged yet"
		})
		if got := countLogged(s, logTLSRefused) > refused; got != wantRefused {
			t.Fatalf("%s: files refused = %v, want %v\n%s", s, got, wantRefused, lastRecords(s, 5))
		}
		for _, addr := range []string{s.RPCAddr(), s.RaftAddr()} {
			cert, err := presentedCert(ctx, addr, client)
			if err != nil {
				t.Fatalf("%s: new connection to %s: %v", s, addr, err)
			}
			if cert.SerialNumber.Cmp(current[i].SerialNumber) != 0 {
				t.Fatalf("%s: a new connection to %s got serial %X, want %X", s, addr, cert.SerialNumber, current[i].SerialNumber)
			}
		}
		t.Logf("%s: %s", s, lastRecords(s, 1))
	}
	// settle waits, after a step, until the prober has opened new
	// connections to every server and every agent has had a heartbeat
	// accepted, so that each step is exercised by both.
	settle := func() {
		t.Helper()
		since := time.Now()
		probes.waitRounds(ctx, t, 2)
		waitHeartbeatedSince(ctx, t, since, fleet)
	}
	rotateClient := func(step string) {
		t.Helper()
		changed, err := client.Reload()
		if err != nil {
			t.Fatalf("%s: the harness's client identity: %v", step, err)
		}
		t.Logf("%s: client: %s", step, changed)
	}

	// 1. New certificates of the same CA.
	for i := range servers {
		current[i] = writeServerCert(t, oldCA, files[i])
		hangUp(i, false)
	}
	if _, err := oldCA.WriteClient(oldCA.ClientCertFile, oldCA.ClientKeyFile); err != nil {
		t.Fatal(err)
	}
	rotateClient("new certificates")
	settle()

	// 2. A new CA: the bundle, the new certificates, the old CA dropped.
	// Each step is done everywhere before the next begins.
	newCA := writeCerts(t, filepath.Join(dir, "new-ca"))
	for i := range servers {
		writeBundle(t, files[i].CAFile, oldCAFile, newCA.CAFile)
		hangUp(i, false)
	}
	writeBundle(t, oldCA.CAFile, oldCAFile, newCA.CAFile) // the harness's CA file
	rotateClient("CA bundle")
	settle()
	for i := range servers {
		current[i] = writeServerCert(t, newCA, files[i])
		hangUp(i, false)
	}
	if _, err := newCA.WriteClient(oldCA.ClientCertFile, oldCA.ClientKeyFile); err != nil {
		t.Fatal(err)
	}
	rotateClient("certificates of the new CA")
	settle()
	for i := range servers {
		writeBundle(t, files[i].CAFile, newCA.CAFile)
		hangUp(i, false)
	}
	writeBundle(t, oldCA.CAFile, newCA.CAFile)
	rotateClient("old CA dropped")
	settle()

	// 3. A damaged key file is refused; the server keeps its certificate
	// (hangUp checks it is still current[0]) and keeps serving.
	if err := os.WriteFile(files[0].KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	hangUp(0, true)
	if rec, ok := servers[0].Logged(logTLSRefused); !ok || !strings.Contains(fmt.Sprint(rec["err"]), files[0].KeyFile) {
		t.Errorf("%s: the refusal does not name %s: %v", servers[0], files[0].KeyFile, rec)
	}
	settle()
	rotation := time.Since(rotationStart)

	probes.finish(t)
	checkFleetUnharmed(t, statsBefore, fleet.Stats())
	if after := allocIDs(waitRunning(ctx, t, leader.Conn(), job.GetId(), rotationNodes)); !slices.Equal(after, allocsBefore) {
		t.Errorf("allocations running after the rotation %v, want the same as before %v", after, allocsBefore)
	}

	// The servers' own new connections: after a leadership transfer the
	// new leader opens raft connections to the others, and a write through
	// a follower is forwarded and commits on every server. None of the
	// servers' connections may have failed on a certificate.
	target := c.Others(leader)[0]
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	_, err := droverv1.NewOperatorServiceClient(leader.Conn()).RaftTransferLeadership(cctx, &droverv1.RaftTransferLeadershipRequest{Id: target.ID()})
	cancel()
	if err != nil {
		checkNoCertificateErrors(t, servers)
		t.Fatalf("transfer leadership to %s: %v", target, err)
	}
	newLeader := c.WaitLeader(ctx)
	follower := c.Others(newLeader)[0]
	retryUnavailable(ctx, t, "register a job through "+follower.String(), func(ctx context.Context) error {
		_, err := registerJob(ctx, follower.Conn(), mock.Job(1), "rotation-after-transfer")
		return err
	})
	c.WaitConverged(ctx)
	checkNoCertificateErrors(t, servers)

	// The old CA's certificates are refused on new connections, both what
	// a client presents and what a server presents; the new ones pass.
	t.Run("old CA refused", func(t *testing.T) {
		oldCert, err := tlsconfig.Config{CAFile: newCA.CAFile, CertFile: oldClient.CertFile, KeyFile: oldClient.KeyFile}.ClientCredentials()
		if err != nil {
			t.Fatal(err)
		}
		oldTrust, err := tlsconfig.Config{CAFile: oldCAFile, CertFile: newCA.ClientCertFile, KeyFile: newCA.ClientKeyFile}.ClientCredentials()
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range servers {
			for name, creds := range map[string]grpc.DialOption{
				"a client certificate of the old CA": grpc.WithTransportCredentials(oldCert),
				"a client trusting only the old CA":  grpc.WithTransportCredentials(oldTrust),
			} {
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				_, err := droverv1.NewClusterServiceClient(s.Dial(creds)).Info(cctx, &droverv1.ServerInfoRequest{})
				cancel()
				if status.Code(err) != codes.Unavailable {
					t.Errorf("%s with %s: Info answered %v, want Unavailable", s, name, err)
				}
			}
			oldServer := tlsconfig.Config{CAFile: newCA.CAFile, CertFile: oldCA.ServerCertFile, KeyFile: oldCA.ServerKeyFile}
			if err := raftProbe(s.RaftAddr(), oldServer); err == nil {
				t.Errorf("%s kept a raft connection with a server certificate of the old CA", s)
			}
			newServer := tlsconfig.Config{CAFile: newCA.CAFile, CertFile: files[i].CertFile, KeyFile: files[i].KeyFile}
			if i == 0 {
				newServer = newCA.Server() // s1's key file is the damaged one
			}
			if err := raftProbe(s.RaftAddr(), newServer); err != nil {
				t.Errorf("%s refused a raft connection with a server certificate of the new CA: %v", s, err)
			}
		}
	})

	t.Logf("rotation took %s (4 SIGHUPs per server and one refused); the whole test %s", rotation.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
}

// writeCerts writes a new CA and its certificates into dir.
func writeCerts(t *testing.T, dir string) *testcerts.Set {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	set, err := testcerts.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// writeServerCert replaces a server's certificate and key with a new pair
// signed by set's CA.
func writeServerCert(t *testing.T, set *testcerts.Set, files tlsconfig.Config) *x509.Certificate {
	t.Helper()
	cert, err := set.WriteServer(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func writeBundle(t *testing.T, path string, caFiles ...string) {
	t.Helper()
	if err := testcerts.WriteBundle(path, caFiles...); err != nil {
		t.Fatal(err)
	}
}

// countLogged counts the records of s's current run with message msg.
func countLogged(s *cluster.Server, msg string) int {
	n := 0
	for _, rec := range s.LogRecords() {
		if rec["msg"] == msg {
			n++
		}
	}
	return n
}

// lastRecords formats the last n TLS records of s's current run.
func lastRecords(s *cluster.Server, n int) string {
	var out []string
	for _, rec := range s.LogRecords() {
		if rec["msg"] == logTLSReloaded || rec["msg"] == logTLSRefused {
			detail := rec["changes"]
			if detail == nil {
				detail = rec["err"]
			}
			out = append(out, fmt.Sprintf("%s: %v", rec["msg"], detail))
		}
	}
	return strings.Join(out[max(0, len(out)-n):], "\n")
}

// presentedCert opens a new TLS connection to addr with the harness's
// client identity and returns the certificate the server presents. On the
// raft port the server refuses a client certificate, but only after our
// side of the TLS 1.3 handshake is complete, so its certificate is seen.
func presentedCert(ctx context.Context, addr string, client *tlsconfig.Reloader) (*x509.Certificate, error) {
	cfg := client.ClientTLS()
	cfg.NextProtos = []string{"h2"} // as gRPC asks; raft ignores it
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	d := &tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// prober opens a new gRPC connection to every server, calls
// ClusterService.Info on it and closes it, round after round, and counts
// what fails: every new connection during a rotation must work.
type prober struct {
	rounds   atomic.Int64
	calls    atomic.Int64
	mu       sync.Mutex
	failures []string
	cancel   context.CancelFunc
	done     chan struct{}
}

func startProber(ctx context.Context, t *testing.T, servers []*cluster.Server, client *tlsconfig.Reloader) *prober {
	ctx, cancel := context.WithCancel(ctx)
	p := &prober{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(p.stop)
	creds := client.ClientCredentials()
	go func() {
		defer close(p.done)
		for {
			for _, s := range servers {
				if err := probeOnce(ctx, s.RPCAddr(), creds); err != nil && ctx.Err() == nil {
					p.mu.Lock()
					p.failures = append(p.failures, fmt.Sprintf("%s at %s: %v", s, time.Now().Format(time.StampMilli), err))
					p.mu.Unlock()
				}
				p.calls.Add(1)
			}
			p.rounds.Add(1)
			select {
			case <-ctx.Done():
				return
			case <-time.After(probeInterval):
			}
		}
	}()
	return p
}

// probeOnce makes one call on a new connection.
func probeOnce(ctx context.Context, addr string, creds credentials.TransportCredentials) error {
	conn, err := grpc.NewClient(addr, rpc.ClientDialOptions(creds)...)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err = droverv1.NewClusterServiceClient(conn).Info(ctx, &droverv1.ServerInfoRequest{})
	return err
}

// waitRounds waits until n more rounds have been completed, so that the
// last step was probed on every server.
func (p *prober) waitRounds(ctx context.Context, t *testing.T, n int64) {
	t.Helper()
	want := p.rounds.Load() + n
	poll(ctx, t, fmt.Sprintf("%d prober rounds", want), func() (bool, string) {
		got := p.rounds.Load()
		return got >= want, fmt.Sprintf("%d done", got)
	})
}

func (p *prober) stop() {
	p.cancel()
	<-p.done
}

// finish stops the prober and fails the test for every failed probe.
func (p *prober) finish(t *testing.T) {
	t.Helper()
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.failures {
		t.Errorf("a new connection failed: %s", f)
	}
	t.Logf("prober: %d new connections in %d rounds, %d failed", p.calls.Load(), p.rounds.Load(), len(p.failures))
}

// allocIDs returns the allocations' ids, sorted.
func allocIDs(allocs []*droverv1.Allocation) []string {
	var ids []string
	for _, a := range allocs {
		ids = append(ids, a.GetId())
	}
	slices.Sort(ids)
	return ids
}

// checkFleetUnharmed fails the test if any call of the agents failed, any
// agent moved to another server, or any node is not ready.
func checkFleetUnharmed(t *testing.T, before, after simagent.Stats) {
	t.Helper()
	counters := []struct {
		name          string
		before, after uint64
	}{
		{"failed registrations", before.RegisterFailures, after.RegisterFailures},
		{"failed heartbeats", before.HeartbeatsFailed, after.HeartbeatsFailed},
		{"failed allocation reports", before.ReportFailures, after.ReportFailures},
		{"refused allocation reports", before.ReportsRefused, after.ReportsRefused},
		{"failed polls", before.PollFailures, after.PollFailures},
		{"failovers", before.Failovers, after.Failovers},
	}
	for _, c := range counters {
		if c.after != c.before {
			t.Errorf("agents: %d %s during the rotation", c.after-c.before, c.name)
		}
	}
	if ready := after.NodeStatuses[droverv1.NodeStatus_NODE_STATUS_READY]; ready != rotationNodes {
		t.Errorf("agents' node statuses %v, want all %d ready", after.NodeStatuses, rotationNodes)
	}
	t.Logf("agents during the rotation: %d heartbeats, %d allocation reports, %d polls answered; none failed",
		after.HeartbeatsOK-before.HeartbeatsOK, after.ReportCalls-before.ReportCalls, after.Polls-before.Polls)
}

// checkNoCertificateErrors fails the test if a server logged a
// certificate its peer refused or it could not verify: the servers'
// connections to each other must not have failed during the rotation
// either. (Refusals of a client certificate on the raft port, which
// presentedCert causes, are another message.)
func checkNoCertificateErrors(t *testing.T, servers []*cluster.Server) {
	t.Helper()
	for _, s := range servers {
		for _, rec := range s.LogRecords() {
			text := fmt.Sprint(rec)
			if strings.Contains(text, "x509:") || strings.Contains(text, "bad certificate") || strings.Contains(text, "unknown certificate") {
				t.Errorf("%s logged a certificate error: %s", s, text)
			}
		}
	}
}
