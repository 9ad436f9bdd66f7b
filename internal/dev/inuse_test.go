package dev

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"
)

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{`/mnt/a\040b`: "/mnt/a b", `/x\134y`: `/x\y`, `/plain`: "/plain", `/end\04`: `/end\04`} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestInUse: an image file loop-mounted by the kernel, read-write or
// read-only, is reported with its mount point and loop device; after the
// unmount, it is free again.
func TestInUse(t *testing.T) {
	testutil.RequireMount(t)
	img := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, img, 8<<20, "-t", "ext4")
	if u, err := InUse(img); err != nil || u != nil {
		t.Fatalf("unmounted image: %v, %v", u, err)
	}
	for _, ro := range []bool{false, true} {
		func() {
			mp := testutil.Mount(t, img, ro)
			defer testutil.Unmount(t, mp)
			u, err := InUse(img)
			if err != nil || u == nil || len(u.Mounts) != 1 {
				t.Fatalf("mounted (ro %v): %+v, %v", ro, u, err)
			}
			m := u.Mounts[0]
			if m.Point != mp || !m.Loop || !strings.HasPrefix(m.Device, "/dev/loop") || m.ReadOnly != ro || u.Writable() == ro {
				t.Errorf("mounted (ro %v) on %s: %+v", ro, mp, u)
			}
			if s := u.String(); !strings.Contains(s, mp) || !strings.Contains(s, "/dev/loop") {
				t.Errorf("message %q names neither mount point nor device", s)
			}
			// The loop device itself is a mounted block device.
			if u2, err := InUse(m.Device); err != nil || u2 == nil || len(u2.Mounts) != 1 || u2.Mounts[0].Point != mp {
				t.Errorf("InUse(%s): %+v, %v", m.Device, u2, err)
			}
		}()
	}
	if u, err := InUse(img); err != nil || u != nil {
		t.Errorf("after unmount: %+v, %v", u, err)
	}
}
