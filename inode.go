package ext4go

import (
	"fmt"
	"io/fs"
	"sync/atomic"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/ialloc"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/pad"
	"github.com/ext4go/ext4go/internal/txn"
)

// node is an in-memory inode. There is at most one node per inode number
// while anyone holds it (see inodeCache), so every change to an inode is
// made to the one node that readers see.
//
// mu is the inode's lock (the kernel's i_rwsem): changes to the inode, its
// block map and its data hold it exclusively; data reads hold it shared, so
// a read never sees blocks a concurrent truncate is freeing. The current
// inode is an immutable value replaced as a whole under mu, so stat-like
// readers load it without locking (in, which marks what it takes; the
// hot paths reuse only inodes nobody marked, see publish).
type node struct {
	ino uint32
	mu  lockstat.RWMutex[lockstat.MFSInode]

	cur     atomic.Pointer[inode.Inode]
	mapping atomic.Pointer[mapState] // block runs built from cur; nil until built or after a change
	// treeChanged is set when the extent tree changed below i_block since
	// the last setInode, which must then drop mapping again (a reader
	// may have rebuilt it from the old inode meanwhile).
	treeChanged atomic.Bool

	opens    atomic.Int32               // open *File handles (an unlinked inode lives until the last closes); changed under mu
	freed    atomic.Bool                // the inode was freed (set under mu): its number may belong to another node now
	orphan   bool                       // unlinked while open, on the orphan list or in the orphan file; mu
	orphanAt int                        // 1 + its slot in the orphan file, 0 if on the list; mu
	allocDir atomic.Pointer[ialloc.Dir] // the inode allocator's state of a directory
	// timesDirtyAt, when not 0, is when cur's timestamps began to differ
	// from the inode table's (Options.Lazytime, unix ns), and the node is
	// in writer.lazyTimes. Changed under mu held exclusively; the
	// expiry reads it without.
	timesDirtyAt atomic.Int64
	// deferTid is the transaction whose commit writes cur into the inode
	// table (inode_defer.go), 0 if none.
	deferTid atomic.Uint64
	// hot is the transaction handle of the hot paths' changes to the
	// node (FS.beginHot): begun and ended by the goroutine holding mu
	// exclusively, never two at once, so that a fallocate or write
	// allocates no handle.
	hot txn.Handle

	// Versions of cur, so that the hot paths can reuse the inode a later
	// change replaced instead of allocating one per change (see in).
	// seq counts the publishes (publish, under mu); seen is one more than
	// the highest seq any counting reader (in) has marked.
	seq, seen atomic.Uint64
	// spare is a replaced inode no reader can hold, for editInodeHot's
	// next copy; curHot says cur came from editInodeHot and was published
	// by setInodeHot, whose callers keep no pointer to it. Both mu.
	spare  *inode.Inode
	curHot bool
	// da is the node's delayed data (delalloc.go), nil until its first
	// delayed write: blocks changed under mu held exclusively, read under
	// mu shared; its count is read by stat without mu.
	da atomic.Pointer[daState]
	// writers counts the open Files that may write (changed at open and
	// Close): a flush asks for stream allocation while one is open
	// (kernel: inode_is_open_for_write).
	writers atomic.Int32
	// The node fills 192 bytes, a size class whose objects start three
	// whole cache lines apart: the nodes of files created one after the
	// other, changed by different goroutines on every write, never share
	// a line (TestHotLayout).
	_ [19 * pad.On]byte
}

// mapState is a node's block map as built for one inode version.
type mapState struct {
	runs []run
	err  error
	// dir is the directory view (FS.dirOf) made from runs, once asked
	// for: read-only, it serves every lookup until the mapping goes.
	dir atomic.Pointer[dir.Dir]
}

func newNode(ino uint32, in *inode.Inode) *node {
	n := &node{ino: ino}
	n.cur.Store(in)
	return n
}

// in returns the current inode, for a reader that may keep it as long as
// it likes, with or without n.mu. The value must not be changed: writers
// copy it, change the copy and publish it.
//
// Recycling (the hot paths' one allocation per change was the inode
// copy). A writer that replaces inode version V (publish) may reuse
// V's memory for a later copy only if no reader can still hold V. Every
// reader marks what it takes: it reads seq (k), loads cur, raises seen to
// at least k+1, and keeps the inode only if seq is still k; otherwise it
// tries again, having touched nothing behind the pointer. publish stores
// the new inode, then raises seq, then reads seen. So a reader that kept
// an inode holds version k or k+1 (the one whose store came between the
// reader's two reads of seq, before its seq rose), and its mark was made
// before the seq of the version replacing it rose, so before that
// writer read seen: publish recycles the version of seq v only while
// seen < v, that is, no reader marked v or v+1. seq never repeats, so a
// pointer that comes back (V reused as a later version) is not mistaken
// for V. Sequentially consistent atomics make this hold; -race and
// TestRecycledInodeNeverSeen try it (storing before raising seq was
// essential: the other order let a reader mark too late).
func (n *node) in() *inode.Inode {
	for {
		k := n.seq.Load()
		p := n.cur.Load()
		if poisonRecycled {
			recycleStep(stepReaderLoaded)
		}
		for m := n.seen.Load(); m <= k && !n.seen.CompareAndSwap(m, k+1); m = n.seen.Load() {
		}
		if n.seq.Load() == k {
			return p
		}
	}
}

// inLocked returns the current inode without marking it, for the hot
// paths' own checks: the caller holds n.mu (either way) and uses the
// pointer only until it releases n.mu or calls editInodeHot, which may
// reuse the memory of an inode replaced meanwhile.
func (n *node) inLocked() *inode.Inode { return n.cur.Load() }

// publish makes in n's inode for every reader. hot says in came from
// editInodeHot and its publisher keeps no pointer to it (setInodeHot),
// which makes it a candidate for reuse once replaced. The inode it
// replaces becomes the spare if it was such a candidate and no reader
// marked it (see in). n.mu is held exclusively, but for a node's first
// inode (newInode publishes it without n.mu).
func (n *node) publish(in *inode.Inode, hot bool) {
	old := n.cur.Load()
	if old == nil {
		// Nobody uses a node without an inode (the cache reports it as
		// not there yet), but the moment it is stored others may find
		// the node and publish under n.mu: so seq first, and nothing
		// after the store. curHot stays false: never recycled.
		n.seq.Add(1)
		n.cur.Store(in)
		return
	}
	n.cur.Store(in)
	if poisonRecycled {
		recycleStep(stepWriterStored)
	}
	v := n.seq.Add(1) - 1 // old's seq
	if poisonRecycled {
		recycleStep(stepWriterRaised)
	}
	if n.curHot && n.seen.Load() < v {
		if poisonRecycled {
			*old = inode.Inode{Size: poisonSize, LinksCount: 0xdead}
			recycledCount.Add(1)
		}
		n.spare = old
	}
	n.curHot = hot
}

// poisonRecycled makes publish overwrite every inode it recycles, and
// in and publish call recycleStepHook: the root package's tests set it
// for all of them (recycle_test.go), so that a reader that still held a
// recycled inode would see poisonSize. Set before any goroutine starts,
// never changed after; false, the hot paths only test it.
var poisonRecycled = false

// recycleStepHook, when set (tests), runs between the steps of in and
// publish, to widen the windows in which they interleave or to order
// them (TestRecycleInterleavings); it is told which step was just done.
var recycleStepHook atomic.Pointer[func(step int)]

func recycleStep(step int) {
	if hook := recycleStepHook.Load(); hook != nil {
		(*hook)(step)
	}
}

// The steps after which in and publish call recycleStepHook.
const (
	stepReaderLoaded = iota // in loaded seq and cur, has not marked
	stepWriterStored        // publish stored the new inode, has not raised seq
	stepWriterRaised        // publish raised seq, has not read seen
)

// recycledCount counts the inodes publish recycled while poisonRecycled.
var recycledCount atomic.Int64

const poisonSize = 0xdead_dead_dead

func (n *node) isDir() bool { return n.in().IsDir() }

func (n *node) isSymlink() bool { return n.in().IsSymlink() }

func (n *node) isRegular() bool { return n.in().IsRegular() }

func (n *node) size() int64 {
	if n.in().Size > 1<<62 {
		return 1 << 62
	}
	return int64(n.in().Size)
}

// inode returns inode ino, from the cache or the inode table.
func (f *FS) inode(ino uint32) (*node, error) {
	return f.cache.getOrLoad(ino, func() (*node, error) { return f.readInode(ino) })
}

// detailNotInUse is the detail of the corruption error for an inode
// number that names no inode: OpenInode answers ESTALE for it.
const detailNotInUse = "referenced but not in use"

// errBeingCreated is the cache's answer for an inode number whose new
// inode is being made: to a lookup by name it is a name that went away.
var errBeingCreated = fmt.Errorf("inode being created: %w", fs.ErrNotExist)

// readInode reads and checks inode ino (kernel: __ext4_iget).
func (f *FS) readInode(ino uint32) (*node, error) {
	group, index, ok := f.sb.GroupOfInode(ino)
	if !ok {
		return nil, &CorruptError{What: "inode number", Block: -1, Ino: ino, Detail: fmt.Sprintf("outside 1..%d", f.sb.InodesCount)}
	}
	gd := f.groups[group]
	byteOff := uint64(index) * uint64(f.inodeSize)
	blk := gd.InodeTable + byteOff/uint64(f.blockSize)
	if blk >= f.sb.BlocksCount() {
		return nil, &CorruptError{What: "inode table", Block: int64(blk), Ino: ino, Detail: "outside the filesystem"}
	}
	raw := make([]byte, f.inodeSize)
	off := byteOff % uint64(f.blockSize)
	err := f.tm.View(blk, func(b []byte) error {
		copy(raw, b[off:])
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read inode %d: %w", ino, err)
	}
	if f.csum && !f.opts.IgnoreChecksums {
		if err := inode.Verify(f.seed, ino, raw); err != nil {
			return nil, fserr.At(err, int64(blk), ino)
		}
	}
	in, err := inode.Decode(raw, f.inodeSize)
	if err != nil {
		return nil, fserr.At(err, int64(blk), ino)
	}
	if in.Size >= 1<<63 {
		// A negative loff_t (kernel: ext4_iget, "bad i_size value").
		return nil, &CorruptError{What: "inode", Block: int64(blk), Ino: ino, Detail: fmt.Sprintf("i_size %d is past the largest file size", in.Size)}
	}
	if in.LinksCount == 0 && in.Mode == 0 && ino >= f.sb.FirstInode() {
		return nil, &CorruptError{What: "inode", Block: int64(blk), Ino: ino, Detail: detailNotInUse}
	}
	return newNode(ino, in), nil
}

// stat builds the public view of n.
func (n *node) stat(f *FS) *Stat {
	in := n.in()
	st := &Stat{
		Ino:        n.ino,
		Mode:       in.Mode,
		UID:        in.UID,
		GID:        in.GID,
		Size:       n.size(),
		Nlink:      uint32(in.LinksCount),
		Blocks:     int64(in.Sectors(uint32(f.blockSize), f.hugeFile)) + n.delayedBlocks()*(f.blockSize/512),
		Atime:      in.Atime.Time(),
		Mtime:      in.Mtime.Time(),
		Ctime:      in.Ctime.Time(),
		Dtime:      in.Dtime,
		Flags:      in.Flags,
		Generation: in.Generation,
		FileACL:    in.ACLBlock(f.is64),
		ProjectID:  in.Projid,
		fsys:       f,
		n:          n,
	}
	if in.Crtime != (inode.Timestamp{}) {
		st.Crtime = in.Crtime.Time()
	}
	if in.IsDevice() {
		maj, mnr := in.Device()
		st.Rdev = uint64(mnr&0xff) | uint64(maj&0xfff)<<8 | uint64(mnr&^0xff)<<12 | uint64(maj&^0xfff)<<32
	}
	return st
}
