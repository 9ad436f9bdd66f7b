package dev

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestOpenImage: an image file opens with its size; a second writer, or a
// reader while a writer has it, gets ErrBusy where the system has locks
// (everywhere but WASI); readers share it.
func TestOpenImage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(path, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	r1, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Open(path, false)
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if r1.Size() != 8192 {
		t.Errorf("size %d, want 8192", r1.Size())
	}
	if _, err := r1.WriteAt([]byte{1}, 0); err == nil {
		t.Error("write through a read-only open succeeded")
	}
	locks := runtime.GOOS != "wasip1"
	if w, err := Open(path, true); locks && !errors.Is(err, ErrBusy) {
		t.Errorf("writer while readers have it: %v, want ErrBusy", err)
	} else if !locks && err == nil {
		w.Close()
	}
	r1.Close()
	r2.Close()
	w, err := Open(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := Open(path, true); locks && !errors.Is(err, ErrBusy) {
		t.Errorf("second writer: %v, want ErrBusy", err)
	}
	if n, err := w.WriteVAt([][]byte{{1, 2}, {}, {3}}, 4096); n != 3 || err != nil {
		t.Fatalf("WriteVAt: %d, %v", n, err)
	}
	if err := w.StartWriteback(); err != nil {
		t.Errorf("StartWriteback: %v", err)
	}
	if err := w.SyncData(); err != nil {
		t.Errorf("SyncData: %v", err)
	}
	got := make([]byte, 4)
	if _, err := w.ReadAt(got, 4095); err != nil || string(got) != "\x00\x01\x02\x03" {
		t.Errorf("read back %v, %v", got, err)
	}
	if _, err := Open(filepath.Dir(path), false); err == nil {
		t.Error("a directory opened as an image")
	}
}
