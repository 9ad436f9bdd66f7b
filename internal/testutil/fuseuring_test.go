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
	select {
	case <-disabled:
		t.Fatal("the disabler went ahead while a user was left")
	case <-time.After(100 * time.Millisecond):
	}
	b()
	var release func()
	select {
	case release = <-disabled:
	case <-time.After(5 * time.Second):
		t.Fatal("the disabler still waits after the last user left")
	}
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
	select {
	case <-entered:
		t.Fatal("a user went ahead under the disabler")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	var c func()
	select {
	case c = <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the user still waits after the disabler ended")
	}
	if v := value(); v != "Y" {
		t.Fatalf("with a user after the disabler: %q", v)
	}
	c()
	if v := value(); v != "N" {
		t.Fatalf("after everyone left: %q, want the N found at first", v)
	}
}
