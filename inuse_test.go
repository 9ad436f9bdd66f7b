//go:build linux

package ext4go_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestOpenRefusesMounted: a writable Open of a kernel-mounted image fails
// with *InUseError naming the mount, and leaves the image alone; reading
// works.
func TestOpenRefusesMounted(t *testing.T) {
	testutil.RequireMount(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4")
	mp := testutil.Mount(t, image, false, "commit=300")
	before := fileHash(t, image)
	_, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	var iu *ext4go.InUseError
	if !errors.As(err, &iu) || !errors.Is(err, ext4go.ErrBusy) || !iu.Mounted || !strings.Contains(err.Error(), mp) {
		t.Fatalf("writable open of a mounted image: %v", err)
	}
	if usage, writable, err := ext4go.InUse(image); err != nil || !writable || !strings.Contains(usage, mp) {
		t.Errorf("InUse: %q %v %v", usage, writable, err)
	}
	ro, err := ext4go.Open(image, &ext4go.Options{IgnoreJournal: true})
	if err != nil {
		t.Fatalf("read-only open of a mounted image: %v", err)
	}
	ro.Close()
	if fileHash(t, image) != before {
		t.Error("the image changed")
	}
	testutil.Unmount(t, mp)
	closeChecked(t, openRW(t, image), image)
}

// TestRefuseUnclean: a filesystem left "not clean" (a crash, a kill) or
// marked with errors is refused for writing until checked, unless
// AllowUnclean; Close then marks it clean.
func TestRefuseUnclean(t *testing.T) {
	for _, state := range []string{"0", "3"} {
		image := filepath.Join(t.TempDir(), "img")
		testutil.Mke2fs(t, image, 8<<20, "-t", "ext4", "-O", "^has_journal")
		testutil.DebugfsWrite(t, image, "ssv state "+state)
		before := fileHash(t, image)
		_, err := ext4go.Open(image, &ext4go.Options{Writable: true})
		if !errors.Is(err, ext4go.ErrCorrupt) || !strings.Contains(err.Error(), "e2fsck -f") {
			t.Errorf("state %s: %v, want a refusal that says to run e2fsck -f", state, err)
		}
		if fileHash(t, image) != before {
			t.Errorf("state %s: the refused open changed the image", state)
		}
		fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, AllowUnclean: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := fsys.Mkdir("d", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Close(); err != nil {
			t.Fatal(err)
		}
		if state == "0" {
			testutil.RequireFsckClean(t, image)
		}
	}
}
