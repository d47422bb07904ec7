package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// completionScript runs `drover completion shell` and returns the script.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := Main(ctx, []string{"completion", shell}, &stdout, &stderr); code != 0 {
		t.Fatalf("drover completion %s: exit code %d\n%s", shell, code, stderr.String())
	}
	return stdout.String()
}

// TestCompletionListsEveryCommand checks each shell's script names every
// command of the table and every flag by its current name, and that the
// shell, where installed, accepts its syntax.
func TestCompletionListsEveryCommand(t *testing.T) {
	entries := completionCommands(Root(io.Discard, io.Discard))
	syntaxCheck := map[string][]string{"bash": {"-n"}, "zsh": {"-n"}, "fish": {"--no-execute"}}
	for shell := range completionScripts() {
		t.Run(shell, func(t *testing.T) {
			script := completionScript(t, shell)
			for _, e := range entries {
				if !strings.Contains(script, shellQuote(e.Path)) {
					t.Errorf("%s is not in the script", e.Path)
				}
				for _, f := range e.Flags {
					if !strings.Contains(script, "-"+f.Name) && !strings.Contains(script, "-o "+shellQuote(f.Name)) {
						t.Errorf("flag -%s of %s is not in the script", f.Name, e.Path)
					}
				}
			}
			bin, err := exec.LookPath(shell)
			if err != nil {
				t.Logf("%s is not installed: the script's syntax is not checked", shell)
				return
			}
			file := filepath.Join(t.TempDir(), "drover."+shell)
			if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, append(syntaxCheck[shell], file)...).CombinedOutput(); err != nil {
				t.Errorf("%s rejects the script: %v\n%s", shell, err, out)
			}
		})
	}
}

func TestCompletionTableLeavesOutDeprecatedNames(t *testing.T) {
	for _, e := range completionCommands(Root(io.Discard, io.Discard)) {
		for _, f := range e.Flags {
			switch f.Name {
			case "servers", "ca-file", "cert-file", "key-file":
				t.Errorf("%s offers deprecated flag -%s", e.Path, f.Name)
			}
		}
	}
}

// TestBashCompletion loads the bash script into bash and completes words
// as bash would on TAB.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	file := filepath.Join(t.TempDir(), "drover.bash")
	if err := os.WriteFile(file, []byte(completionScript(t, "bash")), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		words string // the command line, the last word being completed
		want  string // COMPREPLY, space-separated
	}{
		{"drover jo", "job"},
		{"drover job st", "status stop"},
		{"drover operator raft l", "list-peers"},
		{"drover job status -add", "-address"},
		{"drover job status web -js", "-json"},
		{"drover server -tls-c", "-tls-ca-file -tls-cert-file"},
		{"drover agent -serv", ""}, // -servers is deprecated: not offered
		{"drover completion ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.words, func(t *testing.T) {
			words := strings.Split(tt.words, " ")
			quoted := make([]string, len(words))
			for i, w := range words {
				quoted[i] = shellQuote(w)
			}
			prog := "source " + shellQuote(file) + "\n" +
				"COMP_WORDS=(" + strings.Join(quoted, " ") + ")\n" +
				"COMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n" +
				"_drover\n" +
				`echo "${COMPREPLY[*]}"`
			out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tt.want {
				t.Errorf("completions %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFishCompletion loads the fish script into fish and asks it what it
// would offer (complete -C), where fish is installed.
func TestFishCompletion(t *testing.T) {
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Skip("fish is not installed: its completion is checked by name only")
	}
	file := filepath.Join(t.TempDir(), "drover.fish")
	if err := os.WriteFile(file, []byte(completionScript(t, "fish")), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		line string
		want string // the offered words, space-separated
	}{
		{"drover job st", "status stop"},
		{"drover operator raft l", "list-peers"},
		{"drover job status web -add", "-address"},
		{"drover server -tls-c", "-tls-ca-file -tls-cert-file"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			prog := "source " + shellQuote(file) + "; complete -C " + shellQuote(tt.line)
			out, err := exec.Command(fish, "--no-config", "-c", prog).CombinedOutput()
			if err != nil {
				t.Fatalf("fish: %v\n%s", err, out)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				word, _, _ := strings.Cut(line, "\t")
				got = append(got, word)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("offered %q, want %q", got, tt.want)
			}
		})
	}
}
