package xattr

import (
	"encoding/binary"
	"fmt"

	"github.com/ext4go/ext4go/internal/fserr"
)

// POSIX ACL entry tags (include/uapi/linux/posix_acl.h).
const (
	ACLUserObj  = 0x01
	ACLUser     = 0x02
	ACLGroupObj = 0x04
	ACLGroup    = 0x08
	ACLMask     = 0x10
	ACLOther    = 0x20
)

// ACL format constants.
const (
	ACLDiskVersion  = 1          // EXT4_ACL_VERSION: the on-disk ext4_acl_header
	ACLXattrVersion = 2          // POSIX_ACL_XATTR_VERSION: the VFS xattr form
	ACLUndefinedID  = 0xFFFFFFFF // e_id of entries without a qualifier in the VFS form
)

// ACLEntry is one POSIX ACL entry. ID is the uid or gid of ACLUser and
// ACLGroup entries and meaningless for the others.
type ACLEntry struct {
	Tag  uint16
	Perm uint16
	ID   uint32
}

func hasID(tag uint16) (bool, error) {
	switch tag {
	case ACLUserObj, ACLGroupObj, ACLMask, ACLOther:
		return false, nil
	case ACLUser, ACLGroup:
		return true, nil
	}
	return false, fmt.Errorf("unknown tag %#x", tag)
}

// DecodeACL decodes ext4's on-disk ACL (kernel: ext4_acl_from_disk): a
// 4-byte header with version 1, then 4-byte entries for the tags without a
// qualifier and 8-byte ones for ACLUser and ACLGroup, exactly filling the
// value. An empty ACL (header only) decodes to nil.
func DecodeACL(v []byte) ([]ACLEntry, error) {
	const what = "POSIX ACL"
	if len(v) < 4 {
		return nil, fserr.Corrupt(what, "%d bytes, no header", len(v))
	}
	if ver := binary.LittleEndian.Uint32(v); ver != ACLDiskVersion {
		return nil, fserr.Corrupt(what, "version %d, want %d", ver, ACLDiskVersion)
	}
	// The kernel's ext4_acl_count: at most four short entries, the rest
	// long; a size no such mix explains is refused.
	n := len(v) - 4
	var count int
	switch {
	case n < 16 && n%4 == 0:
		count = n / 4
	case n >= 16 && (n-16)%8 == 0:
		count = (n-16)/8 + 4
	default:
		return nil, fserr.Corrupt(what, "size %d fits no entry count", len(v))
	}
	out := make([]ACLEntry, 0, count)
	p := 4
	for range count {
		if len(v)-p < 4 {
			return nil, fserr.Corrupt(what, "truncated entry at %d", p)
		}
		e := ACLEntry{Tag: binary.LittleEndian.Uint16(v[p:]), Perm: binary.LittleEndian.Uint16(v[p+2:])}
		long, err := hasID(e.Tag)
		if err != nil {
			return nil, fserr.Corrupt(what, "entry at %d: %v", p, err)
		}
		if long {
			if len(v)-p < 8 {
				return nil, fserr.Corrupt(what, "truncated entry at %d", p)
			}
			e.ID = binary.LittleEndian.Uint32(v[p+4:])
			p += 8
		} else {
			e.ID = ACLUndefinedID
			p += 4
		}
		out = append(out, e)
	}
	if p != len(v) {
		return nil, fserr.Corrupt(what, "entries end at %d of %d bytes", p, len(v))
	}
	if count == 0 {
		return nil, nil
	}
	return out, nil
}

// EncodeACL builds ext4's on-disk ACL (kernel: ext4_acl_to_disk). Only
// shapes the kernel can read back are accepted: at most four entries without
// a qualifier, and exactly four when there are ACLUser or ACLGroup entries
// (every valid POSIX ACL has that shape).
func EncodeACL(es []ACLEntry) ([]byte, error) {
	short := 0
	for _, e := range es {
		if long, _ := hasID(e.Tag); !long {
			short++
		}
	}
	if short > 4 || short < 4 && short != len(es) {
		return nil, fmt.Errorf("xattr: ACL with %d entries, %d without a qualifier: not storable", len(es), short)
	}
	b := binary.LittleEndian.AppendUint32(nil, ACLDiskVersion)
	for _, e := range es {
		long, err := hasID(e.Tag)
		if err != nil {
			return nil, fmt.Errorf("xattr: ACL: %v", err)
		}
		b = binary.LittleEndian.AppendUint16(b, e.Tag)
		b = binary.LittleEndian.AppendUint16(b, e.Perm)
		if long {
			b = binary.LittleEndian.AppendUint32(b, e.ID)
		}
	}
	return b, nil
}

// DecodeXattrACL decodes the VFS xattr form of an ACL (kernel:
// posix_acl_from_xattr): a 4-byte header with version 2, then 8-byte
// entries. An empty ACL decodes to nil.
func DecodeXattrACL(v []byte) ([]ACLEntry, error) {
	const what = "POSIX ACL xattr"
	if len(v) < 4 {
		return nil, fserr.Corrupt(what, "%d bytes, no header", len(v))
	}
	if ver := binary.LittleEndian.Uint32(v); ver != ACLXattrVersion {
		return nil, fserr.Corrupt(what, "version %d, want %d", ver, ACLXattrVersion)
	}
	if (len(v)-4)%8 != 0 {
		return nil, fserr.Corrupt(what, "%d bytes of entries, not a multiple of 8", len(v)-4)
	}
	var out []ACLEntry
	for p := 4; p < len(v); p += 8 {
		e := ACLEntry{Tag: binary.LittleEndian.Uint16(v[p:]), Perm: binary.LittleEndian.Uint16(v[p+2:]), ID: binary.LittleEndian.Uint32(v[p+4:])}
		long, err := hasID(e.Tag)
		if err != nil {
			return nil, fserr.Corrupt(what, "entry at %d: %v", p, err)
		}
		if !long {
			e.ID = ACLUndefinedID
		}
		out = append(out, e)
	}
	return out, nil
}

// EncodeXattrACL builds the VFS xattr form of an ACL (kernel:
// posix_acl_to_xattr), with ACLUndefinedID for entries without a
// qualifier.
func EncodeXattrACL(es []ACLEntry) ([]byte, error) {
	b := binary.LittleEndian.AppendUint32(nil, ACLXattrVersion)
	for _, e := range es {
		long, err := hasID(e.Tag)
		if err != nil {
			return nil, fmt.Errorf("xattr: ACL: %v", err)
		}
		id := uint32(ACLUndefinedID)
		if long {
			id = e.ID
		}
		b = binary.LittleEndian.AppendUint16(b, e.Tag)
		b = binary.LittleEndian.AppendUint16(b, e.Perm)
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	return b, nil
}

// ACLToXattr converts an on-disk ACL value to the VFS form getfattr shows.
func ACLToXattr(disk []byte) ([]byte, error) {
	es, err := DecodeACL(disk)
	if err != nil {
		return nil, err
	}
	return EncodeXattrACL(es)
}

// ACLFromXattr converts a VFS-form ACL (as setfacl passes it) to the
// on-disk value.
func ACLFromXattr(v []byte) ([]byte, error) {
	es, err := DecodeXattrACL(v)
	if err != nil {
		return nil, err
	}
	return EncodeACL(es)
}

// ValidACL reports whether es is a POSIX ACL the kernel accepts (kernel:
// posix_acl_valid): entries in tag order, one each of ACLUserObj,
// ACLGroupObj and ACLOther, named entries in increasing ID order without
// duplicates, at most one ACLMask and one when there are named entries,
// and permissions within rwx.
func ValidACL(es []ACLEntry) error {
	var userObj, groupObj, other, mask, named int
	prevTag := uint16(0)
	prevID := uint32(0)
	for i, e := range es {
		if e.Perm&^7 != 0 {
			return fmt.Errorf("ACL entry %d: permissions %#o", i, e.Perm)
		}
		if e.Tag < prevTag {
			return fmt.Errorf("ACL entry %d: tag %#x out of order", i, e.Tag)
		}
		switch e.Tag {
		case ACLUserObj:
			userObj++
		case ACLGroupObj:
			groupObj++
		case ACLOther:
			other++
		case ACLMask:
			mask++
		case ACLUser, ACLGroup:
			if e.Tag == prevTag && e.ID <= prevID {
				return fmt.Errorf("ACL entry %d: ID %d out of order or repeated", i, e.ID)
			}
			named++
			prevID = e.ID
		default:
			return fmt.Errorf("ACL entry %d: unknown tag %#x", i, e.Tag)
		}
		prevTag = e.Tag
	}
	if userObj != 1 || groupObj != 1 || other != 1 || mask > 1 || named > 0 && mask == 0 {
		return fmt.Errorf("ACL: %d owner, %d group, %d other, %d mask and %d named entries", userObj, groupObj, other, mask, named)
	}
	return nil
}

// ACLMode is the permission bits es gives the file mode (kernel:
// posix_acl_equiv_mode): the owner's, the mask's (or the owning group's)
// and the others' permissions. equiv reports whether the mode says all
// the ACL does (no named entries, no mask), so it need not be stored.
// es must be valid.
func ACLMode(es []ACLEntry) (perm uint32, equiv bool) {
	equiv = true
	var group, mask uint32
	hasMask := false
	for _, e := range es {
		p := uint32(e.Perm & 7)
		switch e.Tag {
		case ACLUserObj:
			perm |= p << 6
		case ACLGroupObj:
			group = p
		case ACLOther:
			perm |= p
		case ACLMask:
			mask, hasMask = p, true
			equiv = false
		default:
			equiv = false
		}
	}
	if hasMask {
		group = mask
	}
	return perm | group<<3, equiv
}

// ACLCreate is a directory's default ACL applied to a new inode of mode
// mode (kernel: posix_acl_create_masq): each base entry and the mask keep
// only the permissions mode grants, and the mode only those they grant.
// It returns the new inode's access ACL and mode (type and special bits
// kept); equiv reports that the mode says all the access ACL does, so it
// need not be stored. def must be valid.
func ACLCreate(def []ACLEntry, mode uint32) (access []ACLEntry, newMode uint32, equiv bool) {
	access = append([]ACLEntry(nil), def...)
	m := mode & 0o777
	equiv = true
	group, mask := -1, -1
	for i := range access {
		e := &access[i]
		switch e.Tag {
		case ACLUserObj:
			e.Perm &= uint16(m >> 6 & 7)
			m &= uint32(e.Perm)<<6 | ^uint32(0o700)
		case ACLUser, ACLGroup:
			equiv = false
		case ACLGroupObj:
			group = i
		case ACLOther:
			e.Perm &= uint16(m & 7)
			m &= uint32(e.Perm) | ^uint32(0o7)
		case ACLMask:
			mask = i
			equiv = false
		}
	}
	g := mask
	if g < 0 {
		g = group
	}
	if g >= 0 {
		e := &access[g]
		e.Perm &= uint16(m >> 3 & 7)
		m &= uint32(e.Perm)<<3 | ^uint32(0o70)
	}
	return access, mode&^0o777 | m&0o777, equiv
}

// ACLChmod gives es the permission bits of mode (kernel:
// __posix_acl_chmod): the owner's entry the owner's bits, the mask (or,
// without one, the owning group's entry) the group's, the others' entry
// the others'.
func ACLChmod(es []ACLEntry, mode uint32) {
	group := -1
	for i := range es {
		switch es[i].Tag {
		case ACLUserObj:
			es[i].Perm = uint16(mode >> 6 & 7)
		case ACLOther:
			es[i].Perm = uint16(mode & 7)
		case ACLGroupObj:
			if group < 0 {
				group = i
			}
		case ACLMask:
			group = i
		}
	}
	if group >= 0 {
		es[group].Perm = uint16(mode >> 3 & 7)
	}
}
