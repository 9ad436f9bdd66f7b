package xattr

import "testing"

func TestACLCreate(t *testing.T) {
	u := func(tag, perm uint16, id uint32) ACLEntry { return ACLEntry{Tag: tag, Perm: perm, ID: id} }
	base := []ACLEntry{u(ACLUserObj, 7, ACLUndefinedID), u(ACLGroupObj, 5, ACLUndefinedID), u(ACLOther, 1, ACLUndefinedID)}
	named := []ACLEntry{u(ACLUserObj, 7, ACLUndefinedID), u(ACLUser, 6, 1000), u(ACLGroupObj, 5, ACLUndefinedID), u(ACLMask, 7, ACLUndefinedID), u(ACLOther, 0, ACLUndefinedID)}
	for _, c := range []struct {
		name      string
		def       []ACLEntry
		mode      uint32
		wantMode  uint32
		wantEquiv bool
		wantPerms []uint16
	}{
		// mode 0666 of a file: owner rw (x dropped), group r, other none.
		{"base file", base, 0o100666, 0o100640, true, []uint16{6, 4, 0}},
		{"base dir", base, 0o40777, 0o40751, true, []uint16{7, 5, 1}},
		// The mask takes the group bits; the named entry is kept as is.
		{"named file", named, 0o100644, 0o100640, false, []uint16{6, 6, 5, 4, 0}},
		{"named dir setgid", named, 0o42775, 0o42770, false, []uint16{7, 6, 5, 7, 0}},
	} {
		if err := ValidACL(c.def); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		acl, mode, equiv := ACLCreate(c.def, c.mode)
		if mode != c.wantMode || equiv != c.wantEquiv {
			t.Errorf("%s: mode %#o equiv %v, want %#o %v", c.name, mode, equiv, c.wantMode, c.wantEquiv)
		}
		for i, e := range acl {
			if e.Perm != c.wantPerms[i] {
				t.Errorf("%s: entry %d perm %o, want %o", c.name, i, e.Perm, c.wantPerms[i])
			}
		}
		if m, eq := ACLMode(acl); m != mode&0o777 || eq != equiv {
			t.Errorf("%s: ACLMode %#o %v, want %#o %v", c.name, m, eq, mode&0o777, equiv)
		}
	}
	for _, bad := range [][]ACLEntry{
		nil,
		{u(ACLUserObj, 7, 0), u(ACLOther, 0, 0)},
		{u(ACLUserObj, 7, 0), u(ACLUser, 7, 5), u(ACLGroupObj, 5, 0), u(ACLOther, 0, 0)},                                     // no mask
		{u(ACLUserObj, 7, 0), u(ACLUser, 7, 5), u(ACLUser, 7, 5), u(ACLGroupObj, 5, 0), u(ACLMask, 7, 0), u(ACLOther, 0, 0)}, // duplicate
		{u(ACLGroupObj, 5, 0), u(ACLUserObj, 7, 0), u(ACLOther, 0, 0)},                                                       // order
		{u(ACLUserObj, 8, 0), u(ACLGroupObj, 5, 0), u(ACLOther, 0, 0)},                                                       // perm
	} {
		if ValidACL(bad) == nil {
			t.Errorf("ValidACL(%v) accepted", bad)
		}
	}
}
