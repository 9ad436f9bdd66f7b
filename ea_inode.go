package ext4go

import (
	"bytes"
	"sync"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
)

// eaValueHash is the hash of a value kept in an EA inode: crc32c with the
// filesystem's checksum seed (kernel: ext4_xattr_inode_hash).
func eaValueHash(f *FS, value []byte) uint32 { return csum.CRC32C(f.seed, value) }

// newEAInode makes an EA inode holding value (kernel:
// ext4_xattr_inode_create and ext4_xattr_inode_write): a regular file with
// EA_INODE_FL, owned as owner is, its data the value, the value's hash in
// i_atime and a reference count of 0 that the entry placed for it raises
// to 1. n.mu of owner is held; h is open.
func (f *FS) newEAInode(h handle, owner *node, value []byte) (*node, error) {
	root, err := f.inode(rootIno)
	if err != nil {
		return nil, err
	}
	oin := owner.in()
	ea, err := f.newInode(h, root, "", 0x8000|0o600, oin.UID, oin.GID)
	if err != nil {
		return nil, err
	}
	ea.mu.Lock()
	defer ea.mu.Unlock()
	in := editInode(ea)
	in.GID = oin.GID // not the root's group, even when the root is setgid
	in.Flags |= inode.FlagEAInode
	s := &extStore{f: f, h: h, ino: ea.ino}
	ed := f.editor(ea, in, s)
	bs := f.blockSize
	nblocks := uint64((int64(len(value)) + bs - 1) / bs)
	for lblk := uint64(0); lblk < nblocks; {
		req := mballoc.Request{Inode: ea.ino, Logical: lblk, Len: uint32(nblocks - lblk), Flags: mballoc.FlagData | mballoc.FlagNoPrealloc,
			FileSize: uint64(len(value))}
		ext, err := f.mapNew(h, in, s, ed, req, nil, false, func(ext mballoc.Extent) error {
			from := int64(lblk) * bs
			to := min(int64(len(value)), from+int64(ext.Len)*bs)
			return f.writeData(ext.Start, lblk, value[from:to], from, true)
		})
		if err != nil {
			f.dropEAInodeLocked(h, ea, in)
			return nil, err
		}
		s.delta = 0
		lblk += uint64(ext.Len)
	}
	in.Size = uint64(len(value))
	in.Atime = inode.Timestamp{Sec: int64(eaValueHash(f, value))}
	in.Ctime = inode.Timestamp{} // the reference count's high half
	in.Version &^= 0xffffffff    // and its low half
	if err := f.setInode(h, ea, in); err != nil {
		return nil, err
	}
	return ea, nil
}

// dropEAInode frees an EA inode that no entry came to refer to.
func (f *FS) dropEAInode(h handle, ea *node) {
	ea.mu.Lock()
	defer ea.mu.Unlock()
	f.dropEAInodeLocked(h, ea, editInode(ea))
}

func (f *FS) dropEAInodeLocked(h handle, ea *node, in *inode.Inode) {
	in.LinksCount = 0
	if err := f.setInode(h, ea, in); err == nil {
		err = f.freeInodeIn(h, ea)
		if err != nil {
			f.setError(err)
		}
	} else {
		f.setError(err)
	}
}

// eaValueCache remembers EA inodes by the hash of their value, so that a
// value set again is shared (one more reference) instead of stored again
// (kernel: the ea_inode mbcache). Entries are hints: findEAInode checks
// the inode is still an EA inode holding exactly the value.
type eaValueCache struct {
	mu sync.Mutex
	m  map[uint32][]uint32
}

// eaValueCacheMax bounds the inodes remembered per hash.
const eaValueCacheMax = 8

func (c *eaValueCache) add(hash, ino uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[uint32][]uint32{}
	}
	inos := c.m[hash]
	for _, x := range inos {
		if x == ino {
			return
		}
	}
	if len(inos) >= eaValueCacheMax {
		inos = inos[1:]
	}
	c.m[hash] = append(inos, ino)
}

func (c *eaValueCache) candidates(hash uint32) []uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint32(nil), c.m[hash]...)
}

// findEAInode returns a live EA inode holding exactly value, or nil.
func (f *FS) findEAInode(value []byte, hash uint32) *node {
	for _, ino := range f.eaValues.candidates(hash) {
		n, err := f.inode(ino)
		if err != nil {
			continue
		}
		n.mu.RLock()
		in := n.in()
		ok := in.HasFlag(inode.FlagEAInode) && in.LinksCount > 0 && in.Size == uint64(len(value)) &&
			uint32(in.Atime.Sec) == hash
		if ok {
			v := make([]byte, len(value))
			_, err := f.readAt(n, v, 0)
			ok = (err == nil || len(v) == 0) && bytes.Equal(v, value)
		}
		n.mu.RUnlock()
		if ok {
			return n
		}
	}
	return nil
}
