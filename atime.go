package ext4go

import (
	"time"

	"github.com/ext4go/ext4go/internal/inode"
)

// AtimeMode is when reads update access times (Options.Atime).
type AtimeMode int

const (
	AtimeNever    AtimeMode = iota // noatime
	AtimeRelative                  // relatime
	AtimeStrict                    // strictatime
)

// touchAtime updates n's access time after a read or a directory listing
// as Options.Atime says (kernel: touch_atime, relatime_need_update). It is
// best effort, as the kernel's: a failure is not the read's. With
// Options.Lazytime the new access time stays in memory (lazytime.go). No
// lock of n may be held.
func (f *FS) touchAtime(n *node) {
	if f.opts.Atime == AtimeNever || f.refuseChange() != nil || f.closed.Load() {
		return
	}
	now := f.now()
	if !f.atimeDue(n.in(), now) {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.freed.Load() || !f.atimeDue(n.in(), now) {
		return
	}
	if f.lazytime() {
		// Always time-only: in memory until the inode is written.
		in := editInode(n)
		in.Atime = inode.FromTime(now)
		f.setTimesLazily(n, in)
		return
	}
	h, err := f.begin()
	if err != nil {
		return
	}
	in := editInode(n)
	in.Atime = inode.FromTime(now)
	f.setInode(h, n, in)
	h.End()
}

// atimeDue reports whether a read at now updates in's access time.
func (f *FS) atimeDue(in *inode.Inode, now time.Time) bool {
	if in.HasFlag(inode.FlagNoAtime) { // chattr +A
		return false
	}
	atime := in.Atime.Time()
	if f.opts.Atime == AtimeStrict {
		return !atime.Equal(now)
	}
	return !atime.After(in.Mtime.Time()) || !atime.After(in.Ctime.Time()) || now.Sub(atime) >= 24*time.Hour
}
