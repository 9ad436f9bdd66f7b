package ext4go_test

// Regression tests for inode lifetime: an operation that found an inode by
// name must never act on it after an unlink freed it (and its number went
// to another file).

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/testutil"
)

// TestOpenRacingUnlink: one goroutine opens, writes and closes x, one
// removes x, one creates bystander files and never touches them again.
// Every bystander must keep its contents and e2fsck must be clean.
func TestOpenRacingUnlink(t *testing.T) {
	for _, cfg := range []struct {
		name string
		args []string
	}{
		{"4k", []string{"-t", "ext4", "-b", "4096"}},
		{"1k-ext3", []string{"-t", "ext3", "-b", "1024"}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 64<<20, cfg.args...)
			fsys := openRW(t, image)
			dur := 2 * time.Second
			if testing.Short() {
				dur = time.Second
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			payload := bytes.Repeat([]byte("x"), 100_000)
			var errs []string
			var mu sync.Mutex
			report := func(s string) {
				mu.Lock()
				if len(errs) < 10 {
					errs = append(errs, s)
				}
				mu.Unlock()
			}
			wg.Add(3)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					f, err := fsys.OpenFile("x", os.O_CREATE|os.O_RDWR, 0o644)
					if err != nil {
						continue
					}
					if _, err := f.WriteAt(payload, 0); err != nil {
						report(fmt.Sprintf("write x: %v", err))
					}
					if err := f.Close(); err != nil {
						report(fmt.Sprintf("close x: %v", err))
					}
				}
			}()
			go func() {
				defer wg.Done()
				for !stop.Load() {
					fsys.Remove("x")
					fsys.Symlink("target-of-y", "y")
					fsys.Remove("y")
				}
			}()
			go func() {
				defer wg.Done()
				for !stop.Load() {
					fsys.SetXattr("y", "user.k", []byte("xattr-of-y"), 0)
					fsys.Lchown("y", 7, 7)
					fsys.Lchtimes("y", time.Unix(1, 0), time.Unix(1, 0))
				}
			}()
			var bystanders int
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					name := fmt.Sprintf("v%d", i)
					if i%2 == 0 {
						if err := fsys.Symlink("target-"+name, name); err != nil {
							report(fmt.Sprintf("symlink %s: %v", name, err))
							return
						}
					} else if err := fsys.WriteFile(name, []byte("contents of "+name), 0o644); err != nil {
						report(fmt.Sprintf("write %s: %v", name, err))
						return
					}
					bystanders = i + 1
				}
			}()
			time.Sleep(dur)
			stop.Store(true)
			wg.Wait()
			for _, e := range errs {
				t.Error(e)
			}
			for i := 0; i < bystanders; i++ {
				name := fmt.Sprintf("v%d", i)
				if i%2 == 0 {
					got, err := fsys.ReadLink(name)
					if err != nil || got != "target-"+name {
						t.Errorf("bystander %s: target %q, %v", name, got, err)
					}
				} else {
					got, err := fsys.ReadFile(name)
					if err != nil || string(got) != "contents of "+name {
						t.Errorf("bystander %s: %d bytes %.20q, %v", name, len(got), got, err)
					}
				}
				if v, err := fsys.GetXattr(name, "user.k"); err == nil {
					t.Errorf("bystander %s has y's xattr %q", name, v)
				}
			}
			t.Logf("%d bystanders", bystanders)
			closeChecked(t, fsys, image)
		})
	}
}
