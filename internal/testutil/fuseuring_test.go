//go:build linux

package testutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestUringParamSharing: users of the parameter overlap (the first
// records it, the last puts it back, the others leave it Y); a disabler
// waits for the users to leave, sets N, keeps a new user out until it
// ends, and puts back what it found.
func TestUringParamSharing(t *testing.T) {
	dir := t.TempDir()
	param := filepath.Join(dir, "enable_uring")
	if err := os.WriteFile(param, []byte("N\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	value := func() string {
		b, err := os.ReadFile(param)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, err := enableUring(param, dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := enableUring(param, dir) // not blocked by a
	if err != nil {
		t.Fatal(err)
	}
	if v := value(); v != "Y" {
		t.Fatalf("with two users: %q", v)
	}
	disabled := make(chan func())
	go func() {
		release, err := disableUring(param, dir)
		if err != nil {
			t.Error(err)
		}
		disabled <- release
	}()
	a()
	if v := value(); v != "Y" {
		t.Fatalf("after the first user left: %q, want Y (the second still needs it)", v)
	}
	release := waitsFor(t, disabled, b, "the disabler", "the last user left")
	if v := value(); v != "N" {
		t.Fatalf("under the disabler: %q", v)
	}
	entered := make(chan func())
	go func() {
		r, err := enableUring(param, dir)
		if err != nil {
			t.Error(err)
		}
		entered <- r
	}()
	c := waitsFor(t, entered, release, "a user", "the disabler ended")
	if v := value(); v != "Y" {
		t.Fatalf("with a user after the disabler: %q", v)
	}
	c()
	if v := value(); v != "N" {
		t.Fatalf("after everyone left: %q, want the N found at first", v)
	}
}

// waitsFor checks that who, whose result comes on done, waits (nothing
// within 100 ms), then calls free and returns who's result, which must
// come within 5 s after it.
func waitsFor[R any](t *testing.T, done <-chan R, free func(), who, freed string) R {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("%s went ahead before %s", who, freed)
	case <-time.After(100 * time.Millisecond):
	}
	free()
	select {
	case r := <-done:
		return r
	case <-time.After(5 * time.Second):
		t.Fatalf("%s still waits after %s", who, freed)
	}
	panic("unreachable")
}
