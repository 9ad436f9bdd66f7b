package ext4go

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenHostDir: the raw directory read gives what os.ReadDir gives, in
// the same order, for every file type, in a directory too big for one
// getdents call.
func TestOpenHostDir(t *testing.T) {
	dir := t.TempDir()
	for i := range 2000 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%04d-%s", i, strings.Repeat("x", i%50))), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	must(os.Symlink("sub", filepath.Join(dir, "link")))
	must(unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	if os.Geteuid() == 0 {
		must(unix.Mknod(filepath.Join(dir, "chr"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))))
		must(unix.Mknod(filepath.Join(dir, "blk"), unix.S_IFBLK|0o644, int(unix.Mkdev(7, 0))))
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	must(err)
	defer l.Close()

	hd, got, err := openHostDir(dir)
	must(err)
	hd.close()
	want, err := os.ReadDir(dir)
	must(err)
	if len(got) != len(want) {
		t.Fatalf("%d entries, os.ReadDir gives %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].name != w.Name() || got[i].typ != w.Type() {
			t.Errorf("entry %d: %q %v, os.ReadDir gives %q %v", i, got[i].name, got[i].typ, w.Name(), w.Type())
		}
	}
	if _, _, err := openHostDir(filepath.Join(dir, "file-0000-")); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("a regular file: %v, want ENOTDIR", err)
	}
}

// TestAppendDirentsMalformed: records that do not tile the buffer are an
// error, not a panic or a loop.
func TestAppendDirentsMalformed(t *testing.T) {
	rec := func(ino uint64, reclen uint16, typ byte, name string) []byte {
		b := make([]byte, 19, reclen)
		binary.NativeEndian.PutUint64(b, ino)
		binary.NativeEndian.PutUint16(b[16:], reclen)
		b[18] = typ
		b = append(b, name...)
		return append(b, make([]byte, int(reclen)-len(b))...)
	}
	good := append(rec(5, 24, unix.DT_REG, "a"), rec(0, 24, unix.DT_REG, "gone")...)
	good = append(good, rec(6, 24, unix.DT_DIR, "..")...)
	ents, err := appendDirents(nil, good)
	if err != nil || len(ents) != 1 || ents[0].name != "a" || ents[0].typ != 0 {
		t.Fatalf("good records: %v, %v", ents, err)
	}
	for name, buf := range map[string][]byte{
		"short":        good[:10],
		"reclen 0":     rec(5, 19, unix.DT_REG, "")[:19:19],
		"reclen small": func() []byte { b := rec(5, 24, unix.DT_REG, "a"); binary.NativeEndian.PutUint16(b[16:], 3); return b }(),
		"reclen big":   func() []byte { b := rec(5, 24, unix.DT_REG, "a"); binary.NativeEndian.PutUint16(b[16:], 400); return b }(),
	} {
		if name == "reclen 0" {
			binary.NativeEndian.PutUint16(buf[16:], 0)
		}
		if _, err := appendDirents(nil, buf); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
