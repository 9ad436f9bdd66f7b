package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpEveryCommand: every command's help has its synopsis, summary,
// options and an example, through --help and through 'ext4go help'.
func TestHelpEveryCommand(t *testing.T) {
	for name, c := range commands {
		out := mustCLI(t, "help", name)
		for _, want := range []string{"usage: ext4go " + name, c.summary, "examples:\n  ", "ext4go " + name} {
			if !strings.Contains(out, want) {
				t.Errorf("ext4go help %s lacks %q:\n%s", name, want, out)
			}
		}
		if name != "help" && name != "version" && name != "completion" && name != "bench" && !strings.Contains(out, "\n  -") {
			t.Errorf("ext4go help %s lists no options:\n%s", name, out)
		}
	}
	out := mustCLI(t, "help")
	for _, kind := range benchKindNames() {
		if !strings.Contains(out, kind) {
			t.Errorf("ext4go help does not list bench kind %s", kind)
		}
	}
	if strings.Contains(mustCLI(t, "help", "mkfs"), ") (default") {
		t.Error("mkfs help repeats a default")
	}
}

// TestVersion: a binary built from this checkout says its revision.
func TestVersion(t *testing.T) {
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the revision cannot be checked", err)
	}
	bin := filepath.Join(t.TempDir(), "ext4go")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The go command stamps no VCS information in some checkouts (a git
	// worktree, whose .git is a file): nothing to print then.
	if info, err := exec.Command("go", "version", "-m", bin).Output(); err == nil && !strings.Contains(string(info), "vcs.revision=") {
		t.Skip("go build stamped no vcs.revision in this checkout (a git worktree?)")
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil || !strings.Contains(string(out), strings.TrimSpace(string(rev))) {
			t.Errorf("ext4go %s: %q, %v; want revision %s", args[0], out, err, rev)
		}
	}
}

// TestCompletion: the bash script loads in bash, registers itself and
// completes commands and options; the zsh one passes zsh's syntax check.
func TestCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	script := filepath.Join(t.TempDir(), "ext4go.bash")
	if err := os.WriteFile(script, []byte(mustCLI(t, "completion", "bash")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bash, "-c", `source "$1"; complete -p ext4go
COMP_WORDS=(ext4go mk); COMP_CWORD=1; _ext4go; echo "cmds: ${COMPREPLY[*]}"
COMP_WORDS=(ext4go ls --rec); COMP_CWORD=2; _ext4go; echo "opts: ${COMPREPLY[*]}"
COMP_WORDS=(ext4go mkfs --si); COMP_CWORD=2; _ext4go; echo "mkfs: ${COMPREPLY[*]}"`, "bash", script).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	for _, want := range []string{"complete -o default -F _ext4go ext4go", "cmds: mkdir mkfs", "opts: --recursive", "mkfs: --size"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("bash completion: %q missing from\n%s", want, out)
		}
	}
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Log("zsh is not installed: its script is not checked")
		return
	}
	zscript := filepath.Join(t.TempDir(), "_ext4go")
	if err := os.WriteFile(zscript, []byte(mustCLI(t, "completion", "zsh")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(zsh, "-n", zscript).CombinedOutput(); err != nil {
		t.Errorf("zsh -n: %v\n%s", err, out)
	}
}

// TestHelpOnStdout: help asked for (--help, -h, of ext4go or of a command)
// goes to standard output with exit 0, as coreutils' does; without a
// command the usage is an error on standard error with exit 1.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"mkfs", "--help"}, {"ls", "--help"}, {"rm", "-h"},
		{"bench", "-h"}, {"bench", "alloc", "--help"}, {"help", "put"}, {"mount", "--help"}} {
		code, out, errs := cli("", args...)
		if code != 0 || !strings.Contains(out, "usage: ext4go") || errs != "" {
			t.Errorf("ext4go %q: exit %d, stdout %.80q, stderr %.200q", args, code, out, errs)
		}
	}
	if code, out, errs := cli(""); code != 1 || out != "" || !strings.Contains(errs, "usage: ext4go") {
		t.Errorf("ext4go: exit %d, stdout %.80q, stderr %.80q", code, out, errs)
	}
}

// TestVersionWithoutRevision: a build without version control
// information says so, and a release build says its version.
func TestVersionWithoutRevision(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ext4go")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.Contains(string(out), "(devel) (no revision: built outside a git checkout or with -buildvcs=false)") {
		t.Errorf("ext4go --version: %q, %v", out, err)
	}
	build = exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.version=v9.8.7", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "--version").Output(); err != nil || !strings.HasPrefix(string(out), "ext4go v9.8.7,") {
		t.Errorf("ext4go --version of a release build: %q, %v", out, err)
	}
}
