//go:build linux

package ext4go_test

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ext4go/ext4go"
)

// fileCapability is a VFS_CAP_REVISION_2 security.capability value
// (cap_net_raw+ep), the kind setcap writes.
func fileCapability() []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|1) // revision 2, effective
	binary.LittleEndian.PutUint32(b[4:], 1<<13)        // permitted: CAP_NET_RAW
	return b
}

// privilegedFile makes name: 8 KiB of data, mode, and a file capability.
func privilegedFile(t *testing.T, fsys *ext4go.FS, name string, mode fs.FileMode) {
	t.Helper()
	if err := fsys.WriteFile(name, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Chmod(name, mode); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SetXattr(name, "security.capability", fileCapability(), 0); err != nil {
		t.Fatal(err)
	}
}

// modeAndCapability returns name's permission and set-ID bits and
// whether it still has a file capability.
func modeAndCapability(t *testing.T, fsys *ext4go.FS, name string) (fs.FileMode, bool) {
	t.Helper()
	fi, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	names, err := fsys.ListXattr(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), slices.Contains(names, "security.capability")
}

// TestDataChangesDropCapability: every library call that changes a
// file's data drops its file capability, as the kernel's
// file_remove_privs does even for root, and keeps its setuid and setgid
// bits, the library acting as a privileged caller (CAP_FSETID); an empty
// write changes nothing and keeps it.
func TestDataChangesDropCapability(t *testing.T) {
	_, fsys := formatRW(t, 32<<20)
	defer fsys.Close()
	const setIDs = fs.ModeSetuid | fs.ModeSetgid | 0o777
	open := func(name string, flag int) *ext4go.File {
		f, err := fsys.OpenFile(name, flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	withFile := func(flag int, op func(f *ext4go.File) error) func(name string) error {
		return func(name string) error {
			f := open(name, flag)
			return errors.Join(op(f), f.Close())
		}
	}
	changes := []struct {
		name string
		op   func(name string) error
	}{
		{"Write", withFile(os.O_WRONLY, func(f *ext4go.File) error { _, err := f.Write([]byte("x")); return err })},
		{"append", withFile(os.O_WRONLY|os.O_APPEND, func(f *ext4go.File) error { _, err := f.WriteString("x"); return err })},
		{"WriteAt", withFile(os.O_RDWR, func(f *ext4go.File) error { _, err := f.WriteAt([]byte("x"), 100); return err })},
		{"ReadFrom", withFile(os.O_WRONLY, func(f *ext4go.File) error { _, err := f.ReadFrom(strings.NewReader("x")); return err })},
		{"Truncate down", withFile(os.O_WRONLY, func(f *ext4go.File) error { return f.Truncate(100) })},
		{"Truncate to the same size", withFile(os.O_WRONLY, func(f *ext4go.File) error { return f.Truncate(8192) })},
		{"Fallocate", withFile(os.O_WRONLY, func(f *ext4go.File) error { return f.Fallocate(0, 8192, 4096) })},
		{"Fallocate keep size", withFile(os.O_WRONLY, func(f *ext4go.File) error { return f.Fallocate(ext4go.FallocKeepSize, 8192, 4096) })},
		{"punch", withFile(os.O_WRONLY, func(f *ext4go.File) error {
			return f.Fallocate(ext4go.FallocPunchHole|ext4go.FallocKeepSize, 0, 4096)
		})},
		{"zero range", withFile(os.O_WRONLY, func(f *ext4go.File) error { return f.Fallocate(ext4go.FallocZeroRange, 0, 4096) })},
		{"O_TRUNC open", withFile(os.O_WRONLY|os.O_TRUNC, func(*ext4go.File) error { return nil })},
		{"O_TRUNC reopen", withFile(os.O_RDONLY, func(f *ext4go.File) error {
			g, err := f.Reopen(os.O_WRONLY | os.O_TRUNC)
			if err != nil {
				return err
			}
			return g.Close()
		})},
		{"WriteFile", func(name string) error { return fsys.WriteFile(name, []byte("x"), 0) }},
	}
	for _, c := range changes {
		name := strings.ReplaceAll(c.name, " ", "-")
		privilegedFile(t, fsys, name, setIDs)
		if err := c.op(name); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if mode, hasCap := modeAndCapability(t, fsys, name); mode != setIDs || hasCap {
			t.Errorf("%s: mode %v, capability kept %v; want %v and none", c.name, mode, hasCap, setIDs)
		}
	}

	// Nothing changed, nothing dropped: an empty write, a read, a
	// failed fallocate.
	privilegedFile(t, fsys, "unchanged", setIDs)
	f := open("unchanged", os.O_RDWR)
	if _, err := f.Write(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Fallocate(ext4go.FallocPunchHole, 0, 4096); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Fatalf("punch without keep size: %v, want EOPNOTSUPP", err)
	}
	f.Close()
	if mode, hasCap := modeAndCapability(t, fsys, "unchanged"); mode != setIDs || !hasCap {
		t.Errorf("after no change: mode %v, capability %v; want %v and kept", mode, hasCap, setIDs)
	}
}

// TestKillPriv: File.KillPriv drops what a change by the caller it
// describes drops on Linux (kernel: setattr_should_drop_suidgid): without
// CAP_FSETID the setuid bit, and the setgid bit of a group-executable
// file or of one whose group the caller is not in; with it, nothing but
// the file capability. A directory keeps its bits.
func TestKillPriv(t *testing.T) {
	_, fsys := formatRW(t, 32<<20)
	defer fsys.Close()
	in := func(uint32) bool { return true }
	notIn := func(uint32) bool { return false }
	for i, c := range []struct {
		mode         fs.FileMode
		unprivileged bool
		inGroup      func(uint32) bool
		want         fs.FileMode
	}{
		{fs.ModeSetuid | fs.ModeSetgid | 0o777, true, nil, 0o777},
		{fs.ModeSetuid | fs.ModeSetgid | 0o767, true, nil, fs.ModeSetgid | 0o767},
		{fs.ModeSetuid | fs.ModeSetgid | 0o767, true, in, fs.ModeSetgid | 0o767},
		{fs.ModeSetuid | fs.ModeSetgid | 0o767, true, notIn, 0o767},
		{fs.ModeSetgid | 0o775, true, in, 0o775},
		{fs.ModeSetuid | fs.ModeSetgid | 0o777, false, notIn, fs.ModeSetuid | fs.ModeSetgid | 0o777},
	} {
		name := "f" + string(rune('a'+i))
		privilegedFile(t, fsys, name, c.mode)
		f := openReadOnly(t, fsys, name)
		changed, err := f.KillPriv(c.unprivileged, c.inGroup)
		f.Close()
		if err != nil || !changed {
			t.Fatalf("%v, unprivileged %v: changed %v, %v", c.mode, c.unprivileged, changed, err)
		}
		if mode, hasCap := modeAndCapability(t, fsys, name); mode != c.want || hasCap {
			t.Errorf("%v, unprivileged %v: mode %v, capability kept %v; want %v and none", c.mode, c.unprivileged, mode, hasCap, c.want)
		}
	}
	if err := fsys.Mkdir("dir", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Chmod("dir", fs.ModeSetuid|fs.ModeSetgid|0o777); err != nil {
		t.Fatal(err)
	}
	d := openReadOnly(t, fsys, "dir")
	changed, err := d.KillPriv(true, nil)
	d.Close()
	if err != nil || changed {
		t.Errorf("directory: changed %v, %v; want nothing", changed, err)
	}
}

func openReadOnly(t *testing.T, fsys *ext4go.FS, name string) *ext4go.File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
