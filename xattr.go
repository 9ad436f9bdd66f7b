package ext4go

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"sort"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/xattr"
)

// maxXattrValue bounds a value read from an EA inode (the kernel's limit
// for one value is 64 KiB; ea_inode allows up to XATTR_SIZE_MAX as well).
const maxXattrValue = 1 << 16

func (f *FS) xattrOptions() xattr.Options {
	return xattr.Options{
		EAInode:     f.sb.HasIncompat(super.IncompatEAInode),
		InodesCount: f.sb.InodesCount,
		FirstIno:    f.sb.FirstInode(),
	}
}

// xattrEntries returns n's extended attributes: those in the inode body
// first, then those in its xattr block, with EA-inode values loaded.
func (f *FS) xattrEntries(n *node) ([]xattr.Entry, error) {
	opts := f.xattrOptions()
	var out []xattr.Entry
	if f.inodeSize > inode.GoodOldSize {
		es, err := xattr.DecodeInode(n.in().Raw, int(n.in().ExtraIsize), opts)
		if err != nil {
			return nil, fserr.At(err, -1, n.ino)
		}
		out = append(out, es...)
	}
	if blk := n.in().ACLBlock(f.is64); blk != 0 {
		b, err := f.readXattrBlock(n.ino, blk)
		if err != nil {
			return nil, fserr.At(err, int64(blk), n.ino)
		}
		if f.csum && !f.opts.IgnoreChecksums {
			if err := xattr.VerifyBlockChecksum(b, blk, f.seed); err != nil {
				return nil, fserr.At(err, int64(blk), n.ino)
			}
		}
		_, es, err := xattr.DecodeBlock(b, opts)
		if err != nil {
			return nil, fserr.At(err, int64(blk), n.ino)
		}
		out = append(out, es...)
	}
	for i := range out {
		if out[i].ValueInum == 0 {
			continue
		}
		v, err := f.eaInodeValue(n, out[i])
		if err != nil {
			return nil, err
		}
		out[i].Value = v
	}
	return out, nil
}

// eaInodeValue reads a value stored in its own inode (ea_inode).
func (f *FS) eaInodeValue(owner *node, e xattr.Entry) ([]byte, error) {
	if e.ValueSize > maxXattrValue {
		return nil, &CorruptError{What: "xattr entry", Block: -1, Ino: owner.ino, Detail: fmt.Sprintf("EA inode value of %d bytes", e.ValueSize)}
	}
	vn, err := f.inode(e.ValueInum)
	if err != nil {
		return nil, err
	}
	if !vn.in().HasFlag(inode.FlagEAInode) || !vn.isRegular() || vn.in().Size != uint64(e.ValueSize) {
		return nil, &CorruptError{What: "EA inode", Block: -1, Ino: e.ValueInum, Detail: fmt.Sprintf("not a value of inode %d's xattrs", owner.ino)}
	}
	v := make([]byte, e.ValueSize)
	if _, err := f.readAt(vn, v, 0); err != nil && len(v) > 0 {
		return nil, err
	}
	if f.w != nil {
		f.eaValues.add(eaValueHash(f, v), vn.ino)
	}
	return v, nil
}

// visibleXattrs returns n's attributes as the VFS shows them: POSIX ACLs
// in their xattr form, system.data (inline data) hidden.
//
// It holds n's lock shared, as data reads do: without it a concurrent
// change could release the xattr block, and a commit let it be reused,
// while it is being read.
func (f *FS) visibleXattrs(n *node) (map[string][]byte, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	es, err := f.xattrEntries(n)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(es))
	for _, e := range es {
		name, ok := e.FullName()
		if !ok || name == xattr.NameInlineData {
			continue
		}
		v := e.Value
		if e.Index == xattr.IndexPosixACLAccess || e.Index == xattr.IndexPosixACLDefault {
			if v, err = xattr.ACLToXattr(e.Value); err != nil {
				return nil, fserr.At(err, -1, n.ino)
			}
		}
		out[name] = v
	}
	return out, nil
}

// ListXattr returns the names of the named file's extended attributes
// (without following a final symlink), sorted.
func (f *FS) ListXattr(name string) ([]string, error) {
	n, err := f.resolve("listxattr", name, false)
	if err != nil {
		return nil, err
	}
	m, err := f.visibleXattrs(n)
	if err != nil {
		return nil, &fs.PathError{Op: "listxattr", Path: name, Err: err}
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names, nil
}

// GetXattr returns the value of the named file's attribute attr (without
// following a final symlink). A missing attribute is ErrNoXattr
// (syscall.ENODATA on Linux).
func (f *FS) GetXattr(name, attr string) ([]byte, error) {
	n, err := f.resolve("getxattr", name, false)
	if err != nil {
		return nil, err
	}
	m, err := f.visibleXattrs(n)
	if err != nil {
		return nil, &fs.PathError{Op: "getxattr", Path: name, Err: err}
	}
	v, ok := m[attr]
	if !ok {
		return nil, &fs.PathError{Op: "getxattr", Path: name, Err: ErrNoXattr}
	}
	return v, nil
}

// Xattrs returns all extended attributes of the file, as ListXattr and
// GetXattr show them.
func (s *Stat) Xattrs() (map[string][]byte, error) {
	if s.fsys == nil {
		return nil, fmt.Errorf("ext4go: Stat not from an FS")
	}
	return s.fsys.visibleXattrs(s.n)
}

// inlineValue returns the system.data attribute of an inline-data inode.
func (f *FS) inlineValue(n *node) ([]byte, error) {
	if f.inodeSize <= inode.GoodOldSize {
		return nil, &CorruptError{What: "inline data", Block: -1, Ino: n.ino, Detail: "128-byte inode cannot hold system.data"}
	}
	es, err := xattr.DecodeInode(n.in().Raw, int(n.in().ExtraIsize), f.xattrOptions())
	if err != nil {
		return nil, fserr.At(err, -1, n.ino)
	}
	for _, e := range es {
		if e.Index == xattr.IndexSystem && string(e.Name) == "data" {
			if e.ValueInum != 0 {
				return nil, &CorruptError{What: "inline data", Block: -1, Ino: n.ino, Detail: "system.data in an EA inode"}
			}
			return e.Value, nil
		}
	}
	return nil, &CorruptError{What: "inline data", Block: -1, Ino: n.ino, Detail: "no system.data attribute"}
}

// inlineData returns the data of an inline-data file: i_block, then the
// system.data value.
func (f *FS) inlineData(n *node) ([]byte, error) {
	ea, err := f.inlineValue(n)
	if err != nil {
		return nil, err
	}
	data := make([]byte, 0, len(n.in().Block)+len(ea))
	data = append(append(data, n.in().Block[:]...), ea...)
	if int64(len(data)) > n.size() {
		data = data[:n.size()]
	}
	return data, nil
}

// inlineDir parses an inline-data directory.
func (f *FS) inlineDir(n *node) (*dir.Inline, error) {
	ea, err := f.inlineValue(n)
	if err != nil {
		return nil, err
	}
	in, err := dir.ParseInline(n.in().Block[:], ea, f.dirFormat())
	if err != nil {
		return nil, fserr.At(err, -1, n.ino)
	}
	return in, nil
}

// hasXattr reports whether n has the attribute index/name, reading as
// little as it can: an inode without an xattr block nor the in-inode
// attribute magic has none. n.mu must be held. The inode is read as the
// lock holder's (inLocked): a reader's read (in) would keep editInodeHot
// from reusing it, an allocation on every write that asks.
func (f *FS) hasXattr(n *node, index uint8, name string) (bool, error) {
	in := n.inLocked()
	if in.ACLBlock(f.is64) == 0 {
		if f.inodeSize <= inode.GoodOldSize {
			return false, nil
		}
		area, err := xattr.IBodyArea(in.Raw, int(in.ExtraIsize))
		if err != nil || len(area) < 4 || binary.LittleEndian.Uint32(area) != xattr.Magic {
			return false, nil
		}
	}
	es, err := f.xattrEntries(n)
	if err != nil {
		return false, err
	}
	for _, e := range es {
		if e.Index == index && string(e.Name) == name {
			return true, nil
		}
	}
	return false, nil
}
