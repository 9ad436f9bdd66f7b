package host

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestModeOf(t *testing.T) {
	for m, want := range map[fs.FileMode]uint32{
		0o644:                                     IFREG | 0o644,
		fs.ModeDir | 0o755:                        IFDIR | 0o755,
		fs.ModeSymlink | 0o777:                    IFLNK | 0o777,
		fs.ModeNamedPipe | 0o600:                  IFIFO | 0o600,
		fs.ModeSocket | 0o755:                     IFSOCK | 0o755,
		fs.ModeDevice | 0o660:                     IFBLK | 0o660,
		fs.ModeDevice | fs.ModeCharDevice | 0o620: IFCHR | 0o620,
		fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | 0o755: IFREG | 0o7755,
		fs.ModeIrregular: 0,
	} {
		if got := ModeOf(m); got != want {
			t.Errorf("ModeOf(%v) = %#o, want %#o", m, got, want)
		}
	}
}

// TestFromFileInfo: what os.Lstat tells, on every system.
func TestFromFileInfo(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := FromFileInfo(fi)
	if st.Type() != IFREG || st.Size != 5 || !st.Mtime.Equal(fi.ModTime()) || st.Nlink < 1 {
		t.Errorf("file: %+v", st)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := FileID(f, &st); err != nil {
		t.Errorf("FileID: %v", err)
	}
	fi, err = os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st := FromFileInfo(fi); st.Type() != IFDIR {
		t.Errorf("directory: %+v", st)
	}
}
