package test_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// repoFile is the path of a file at the repository's root.
func repoFile(name string) string { return filepath.Join("..", name) }

// serverFlags are the flags `drover server` knows, as -h lists them.
func serverFlags(t *testing.T) map[string]bool {
	t.Helper()
	out, _ := exec.Command(droverBin, "server", "-h").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 20 {
		t.Fatalf("drover server -h lists %d flags:\n%s", len(flags), out)
	}
	return flags
}

// checkServerEnv fails for a DROVER_ variable that names no flag of
// `drover server` (it would be ignored silently).
func checkServerEnv(t *testing.T, where string, env map[string]string, flags map[string]bool) {
	t.Helper()
	for k := range env {
		flag := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "DROVER_")), "_", "-")
		if strings.HasPrefix(k, "DROVER_") && !flags[flag] {
			t.Errorf("%s sets %s, but drover server has no -%s", where, k, flag)
		}
	}
}

// readEnvFile reads KEY=VALUE lines, skipping comments and blank lines.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, line)
		}
		env[k] = v
	}
	return env
}

// TestSystemdUnit checks the unit with `systemd-analyze verify` (any
// warning fails it) and that its example configuration sets only flags
// the server has.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze: install Debian's systemd package to check the unit")
	}
	checkServerEnv(t, "drover.env", readEnvFile(t, repoFile("packaging/systemd/drover.env")), serverFlags(t))

	unit, err := os.ReadFile(repoFile("packaging/systemd/drover.service"))
	if err != nil {
		t.Fatal(err)
	}
	// verify wants the executable and environment file to exist: point
	// them at the test's binary and a copy of the example.
	dir := t.TempDir()
	env := filepath.Join(dir, "drover.env")
	example, err := os.ReadFile(repoFile("packaging/systemd/drover.env"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, example, 0o600); err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/drover", droverBin)
	text = strings.ReplaceAll(text, "/etc/drover/drover.env", env)
	path := filepath.Join(dir, "drover.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, want := range []string{"User=drover", "ProtectSystem=strict", "NoNewPrivileges=yes", "Restart=on-failure", "LimitNOFILE=", "TimeoutStopSec="} {
		if !strings.Contains(text, "\n"+want) {
			t.Errorf("the unit has no %s", want)
		}
	}
}

// TestContainerImage builds the image and runs `drover version` in it,
// where a container runtime answers.
func TestContainerImage(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker: the image cannot be built here")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, docker, "info").CombinedOutput(); err != nil {
		t.Skipf("docker cannot reach a container runtime, so the image cannot be built here: %v: %s", err, lastLine(out))
	}
	tag := "drover-test:" + fmt.Sprint(time.Now().UnixNano())
	build := exec.CommandContext(ctx, docker, "build", "-t", tag, "--build-arg", "VERSION=0.0.1-test", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(docker, "rmi", "-f", tag).Run() })
	out, err := exec.CommandContext(ctx, docker, "run", "--rm", tag, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "drover 0.0.1-test") {
		t.Fatalf("drover version in the image: %v\n%s", err, out)
	}
	user, err := exec.CommandContext(ctx, docker, "image", "inspect", "-f", "{{.Config.User}}", tag).Output()
	if err != nil || strings.TrimSpace(string(user)) == "" || strings.HasPrefix(string(user), "root") {
		t.Errorf("the image runs as %q (%v), want a non-root user", user, err)
	}
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	return s[strings.LastIndex(s, "\n")+1:]
}

// composeFile is what the test reads of docker-compose.yml.
type composeFile struct {
	Services map[string]struct {
		Environment map[string]string `yaml:"environment"`
		Command     []string          `yaml:"command"`
	} `yaml:"services"`
}

// imageEnv returns the ENV of the Dockerfile's last stage.
func imageEnv(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(repoFile("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	env := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "FROM "):
			env = map[string]string{}
		case strings.HasPrefix(line, "ENV "):
			for _, kv := range strings.Fields(strings.TrimPrefix(line, "ENV ")) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
	}
	return env
}

// TestComposeCluster runs what docker-compose.yml describes without
// containers: each service is a process with the image's environment and
// the service's, its host name standing for a loopback address of its own
// (all of 127.0.0.0/8 is loopback), and the cluster must form with every
// simulated node ready. No container runtime is needed, so it always runs.
func TestComposeCluster(t *testing.T) {
	ctx := within(t, testContext(t), 2*time.Minute)
	data, err := os.ReadFile(repoFile("docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose composeFile
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	hosts := map[string]string{"s1": "127.0.0.11", "s2": "127.0.0.12", "s3": "127.0.0.13"}
	local := func(v, host string) string {
		v = strings.ReplaceAll(v, "0.0.0.0", hosts[host])
		for name, ip := range hosts {
			v = regexp.MustCompile(`\b`+name+`\b`).ReplaceAllString(v, ip)
		}
		return v
	}
	flags := serverFlags(t)
	dir := t.TempDir()
	for host := range hosts {
		svc, ok := compose.Services[host]
		if !ok {
			t.Fatalf("docker-compose.yml has no service %s", host)
		}
		env := imageEnv(t)
		for k, v := range svc.Environment {
			env[k] = v
		}
		if checkServerEnv(t, "service "+host, env, flags); t.Failed() {
			t.FailNow()
		}
		for k, v := range env {
			env[k] = local(v, host)
		}
		env["DROVER_DATA_DIR"] = filepath.Join(dir, host)
		startProcess(t, filepath.Join(dir, host+".log"), env, "server")
	}
	agents := compose.Services["agents"]
	if len(agents.Command) == 0 || agents.Command[0] != "agent" {
		t.Fatalf("the agents service runs %q, want drover agent", agents.Command)
	}
	args := make([]string, len(agents.Command))
	for i, a := range agents.Command {
		args[i] = local(a, "")
	}
	startProcess(t, filepath.Join(dir, "agents.log"), nil, args...)

	conn, err := grpc.NewClient(hosts["s1"]+":4650", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	poll(ctx, t, "3 healthy servers", func() (bool, string) {
		m, err := droverv1.NewOperatorServiceClient(conn).ServerMembers(ctx, &droverv1.ServerMembersRequest{})
		return err == nil && m.GetHealthy() && len(m.GetServers()) == 3, fmt.Sprint(m, err)
	})
	want := 0
	for i, a := range args {
		if a == "-sim-nodes" && i+1 < len(args) {
			fmt.Sscan(args[i+1], &want)
		}
	}
	poll(ctx, t, fmt.Sprintf("%d ready nodes", want), func() (bool, string) {
		resp, err := droverv1.NewNodeServiceClient(conn).List(ctx, &droverv1.ListNodesRequest{})
		ready := 0
		for _, n := range resp.GetNodes() {
			if n.GetStatus() == droverv1.NodeStatus_NODE_STATUS_READY {
				ready++
			}
		}
		return err == nil && want > 0 && ready == want, fmt.Sprintf("%d ready, %v", ready, err)
	})
}

// startProcess runs drover with args and, when env is not nil, only that
// environment; its output goes to logPath, printed if the test fails. The
// process is killed when the test ends.
func startProcess(t *testing.T, logPath string, env map[string]string, args ...string) {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(droverBin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if env != nil {
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start drover %v: %v", args, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("=== %s:\n%s", filepath.Base(logPath), tail(string(out), 40))
		}
	})
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
