package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestProfiledWritesTraceAndProfile: EXT4GO_TRACE and EXT4GO_CPUPROFILE
// leave a Go execution trace and a CPU profile of the command; a path that
// cannot be created is ignored, and the command still runs.
func TestProfiledWritesTraceAndProfile(t *testing.T) {
	dir := t.TempDir()
	tr, prof := filepath.Join(dir, "trace"), filepath.Join(dir, "cpu")
	t.Setenv("EXT4GO_TRACE", tr)
	t.Setenv("EXT4GO_CPUPROFILE", prof)
	img := newImage(t, 8<<20)
	if code := profiled(func() int { mustCLI(t, "ls", img); return 0 }); code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, err := os.ReadFile(tr)
	if err != nil || !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Errorf("trace: %d bytes starting %q, %v", len(b), b[:min(len(b), 16)], err)
	}
	if b, err := os.ReadFile(prof); err != nil || len(b) == 0 {
		t.Errorf("CPU profile: %d bytes, %v", len(b), err)
	}
	t.Setenv("EXT4GO_TRACE", filepath.Join(dir, "no-such-dir", "trace"))
	ran := false
	if code := profiled(func() int { ran = true; return 0 }); code != 0 || !ran {
		t.Errorf("with an impossible trace path: exit %d, ran %v", code, ran)
	}
}
