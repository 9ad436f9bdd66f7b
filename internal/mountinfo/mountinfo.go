// Package mountinfo reads the kernel's table of mounts,
// /proc/self/mountinfo (Documentation/filesystems/proc.rst, 3.5): which
// device is mounted where and how. Parse is pure and builds everywhere;
// Read reads the file, on Linux only (read_linux.go).
package mountinfo

import (
	"bufio"
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"

	"github.com/ext4go/ext4go/internal/devnum"
)

// ErrNoMountinfo is Read's error where the kernel keeps no
// /proc/self/mountinfo (every system but Linux).
var ErrNoMountinfo = errors.New("the mount table /proc/self/mountinfo is Linux's; not available on " + runtime.GOOS)

// Mount is one line of the table.
type Mount struct {
	Dev      uint64 // the mounted device number (Linux's dev_t, devnum.Mkdev)
	Point    string // mount point, unescaped
	ReadOnly bool   // mounted ro
	FSType   string
	Source   string // e.g. /dev/loop3
}

// Parse reads a mountinfo table; malformed lines are skipped.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent maj:min root mountpoint options [optional...] - fstype source superoptions
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			continue
		}
		maj, min, ok := strings.Cut(f[2], ":")
		a, err1 := strconv.ParseUint(maj, 10, 32)
		b, err2 := strconv.ParseUint(min, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		m := Mount{Dev: devnum.Mkdev(uint32(a), uint32(b)), Point: Unescape(f[4])}
		for _, o := range strings.Split(f[5], ",") {
			m.ReadOnly = m.ReadOnly || o == "ro"
		}
		for i, fld := range f {
			if fld == "-" && i+2 < len(f) {
				m.FSType, m.Source = f[i+1], Unescape(f[i+2])
				break
			}
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// Unescape undoes mountinfo's octal escapes (\040 for a space).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
