package xattr

import (
	"fmt"
	"strings"
)

// Name indexes (kernel: EXT4_XATTR_INDEX_*).
const (
	IndexUser            = 1
	IndexPosixACLAccess  = 2
	IndexPosixACLDefault = 3
	IndexTrusted         = 4
	IndexLustre          = 5
	IndexSecurity        = 6
	IndexSystem          = 7 // other system.* names, e.g. system.data of inline data
	IndexRichACL         = 8
	IndexHurd            = 10 // gnu.*, written by the Hurd
)

// Full names of the indexes whose whole name is the prefix.
const (
	NamePosixACLAccess  = "system.posix_acl_access"
	NamePosixACLDefault = "system.posix_acl_default"
	NameRichACL         = "system.richacl"
	NameInlineData      = "system.data" // IndexSystem, suffix "data"
)

// prefixes maps each index to the prefix of its full names.
var prefixes = map[uint8]string{
	IndexUser:            "user.",
	IndexPosixACLAccess:  NamePosixACLAccess,
	IndexPosixACLDefault: NamePosixACLDefault,
	IndexTrusted:         "trusted.",
	IndexLustre:          "lustre.",
	IndexSecurity:        "security.",
	IndexSystem:          "system.",
	IndexRichACL:         NameRichACL,
	IndexHurd:            "gnu.",
}

// FullName joins an index's prefix and a suffix into the name the VFS
// shows, like e2fsprogs (which simply concatenates). It returns "" and false
// for an unknown index.
func FullName(index uint8, suffix []byte) (string, bool) {
	p, ok := prefixes[index]
	if !ok {
		return "", false
	}
	return p + string(suffix), true
}

// SplitName maps a full name to its index and suffix, as the kernel's
// handlers do: the ACL and richacl names exactly (empty suffix), the other
// prefixes with a non-empty suffix of at most 255 bytes.
func SplitName(full string) (uint8, []byte, error) {
	switch full {
	case NamePosixACLAccess:
		return IndexPosixACLAccess, []byte{}, nil
	case NamePosixACLDefault:
		return IndexPosixACLDefault, []byte{}, nil
	case NameRichACL:
		return IndexRichACL, []byte{}, nil
	}
	for _, idx := range []uint8{IndexUser, IndexTrusted, IndexSecurity, IndexSystem, IndexLustre, IndexHurd} {
		p := prefixes[idx]
		suffix, ok := strings.CutPrefix(full, p)
		if !ok {
			continue
		}
		switch {
		case suffix == "":
			return 0, nil, fmt.Errorf("xattr: %q: empty name after the prefix", full)
		case len(suffix) > 255:
			return 0, nil, fmt.Errorf("xattr: %q: name longer than 255 bytes", full)
		case strings.IndexByte(suffix, 0) >= 0:
			return 0, nil, fmt.Errorf("xattr: %q: NUL in name", full)
		}
		return idx, []byte(suffix), nil
	}
	return 0, nil, fmt.Errorf("xattr: %q: unsupported name prefix", full)
}
