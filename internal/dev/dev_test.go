//go:build linux || darwin || freebsd

package dev

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCloseReleasesLockDespiteCopies: a child process forked while the
// image is open holds a copy of its file descriptor until it execs, and
// close(2) alone then leaves the flock in place (lock_unix.go); Close must release it
// explicitly so that the image can be opened again at once.
func TestCloseReleasesLockDespiteCopies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(path, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path, true)
	if err != nil {
		t.Fatal(err)
	}
	// The copy a concurrently forked child would hold.
	dup, err := unix.Dup(int(d.f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dup)
	if _, err := Open(path, false); !errors.Is(err, ErrBusy) {
		t.Fatalf("second open while a writer holds the image: %v, want ErrBusy", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := Open(path, true)
	if err != nil {
		t.Fatalf("open after Close, with a copy of the old descriptor alive: %v", err)
	}
	d2.Close()
}
