//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs

import (
	"encoding/binary"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// TestLightRequest: requests whose work is small and bounded are light;
// larger I/O, truncates, and calls that may free a large file, wait, or
// list a directory are not.
func TestLightRequest(t *testing.T) {
	le := binary.LittleEndian
	req := func(op uint32, arg func(a []byte)) []byte {
		h := make([]byte, uringHeaderSize)
		le.PutUint32(h[4:], op)
		if arg != nil {
			arg(h[uringOpIn:uringEntInOut])
		}
		return h
	}
	const opUnlink, opRename, opRelease, opFsync, opReaddir, opReaddirplus, opRename2, opCopyFileRange = 10, 12, 18, 20, 28, 44, 45, 47
	for _, c := range []struct {
		name    string
		h       []byte
		payload int
		light   bool
	}{
		{"lookup", req(opLookup, nil), 12, true},
		{"getattr", req(opGetattr, nil), 0, true},
		{"create", req(opCreate, nil), 12, true},
		{"create truncating", req(opCreate, func(a []byte) { le.PutUint32(a, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC) }), 12, false},
		{"getxattr", req(opGetxattr, nil), 20, true},
		{"statfs", req(opStatfs, nil), 0, true},
		{"setattr mode", req(opSetattr, func(a []byte) { le.PutUint32(a, fuse.FATTR_MODE) }), 0, true},
		{"setattr size", req(opSetattr, func(a []byte) { le.PutUint32(a, fuse.FATTR_SIZE|fuse.FATTR_MODE) }), 0, false},
		{"read 4k", req(opRead, func(a []byte) { le.PutUint32(a[16:], 4096) }), 0, true},
		{"read 128k", req(opRead, func(a []byte) { le.PutUint32(a[16:], lightIO) }), 0, true},
		{"read 1m", req(opRead, func(a []byte) { le.PutUint32(a[16:], 1<<20) }), 0, false},
		{"write 10k", req(opWrite, nil), 10240, true},
		{"write 1m", req(opWrite, nil), 1 << 20, false},
		{"fallocate 8k", req(opFallocate, func(a []byte) { le.PutUint64(a[16:], 8192) }), 0, true},
		{"fallocate 1g", req(opFallocate, func(a []byte) { le.PutUint64(a[16:], 1<<30) }), 0, false},
		{"unlink", req(opUnlink, nil), 4, false},
		{"rename", req(opRename, nil), 8, false},
		{"rename2", req(opRename2, nil), 8, false},
		{"release", req(opRelease, nil), 0, false},
		{"fsync", req(opFsync, nil), 0, false},
		{"readdir", req(opReaddir, nil), 0, false},
		{"readdirplus", req(opReaddirplus, nil), 0, false},
		{"copy_file_range", req(opCopyFileRange, nil), 0, false},
		{"ioctl", req(opIoctl, nil), 0, false},
	} {
		if got := lightRequest(c.h, c.payload); got != c.light {
			t.Errorf("%s: light %v, want %v", c.name, got, c.light)
		}
	}
}

// TestSomeCPUIdle: SCHED_IDLE pays only while at least half a CPU's time
// was idle.
func TestSomeCPUIdle(t *testing.T) {
	for _, c := range []struct {
		total0, idle0, total1, idle1 uint64
		cpus                         int
		want, ok                     bool
	}{
		{1000, 500, 2000, 1000, 2, true, true},  // half of two CPUs idle
		{1000, 500, 2000, 750, 2, true, true},   // a quarter of two: half a CPU
		{1000, 500, 2000, 740, 2, false, true},  // less
		{1000, 500, 2000, 500, 2, false, true},  // none
		{1000, 500, 2000, 560, 8, false, true},  // under half a CPU of eight
		{1000, 500, 2000, 570, 8, true, true},   // over it
		{1000, 500, 1000, 500, 2, false, false}, // no time passed: no news
		{1000, 500, 2000, 400, 2, false, false}, // a counter went back: no news
		{1000, 500, 2000, 1000, 0, true, true},  // no CPU count: taken as one
		{1000, 500, 2000, 600, 0, false, true},  // ...which was busy
		{0, 0, 1 << 62, 1 << 60, 2, true, true}, // large counters do not overflow
	} {
		if got, ok := someCPUIdle(c.total0, c.idle0, c.total1, c.idle1, c.cpus); got != c.want || ok != c.ok {
			t.Errorf("%+v: %v, %v; want %v, %v", c, got, ok, c.want, c.ok)
		}
	}
}

// TestReadCPUTimes: the machine's CPU times read from /proc/stat, idle
// within all, and they do not go back.
func TestReadCPUTimes(t *testing.T) {
	total0, idle0, err := readCPUTimes()
	if err != nil {
		t.Fatal(err)
	}
	if total0 == 0 || idle0 > total0 {
		t.Fatalf("total %d, idle %d", total0, idle0)
	}
	total1, idle1, err := readCPUTimes()
	if err != nil {
		t.Fatal(err)
	}
	if total1 < total0 || idle1 < idle0 {
		t.Errorf("CPU times went back: %d/%d then %d/%d", total0, idle0, total1, idle1)
	}
}
