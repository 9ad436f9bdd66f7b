package main

import (
	"strconv"
	"strings"
)

// modeSpec is a MODE of chmod and mkdir -m as GNU coreutils takes it: an
// octal number, or symbolic clauses ([ugoa]*[-+=][rwxXst]*|[ugo], comma
// separated; chmod(1)).
type modeSpec struct {
	octal  bool
	mode   uint32 // octal: the mode
	digits int    // octal: how many digits it was written with
	// clauses, for a symbolic mode
	clauses []modeClause
	umask   uint32 // symbolic: what a clause without [ugoa] leaves alone
}

type modeClause struct {
	who uint32 // the bits the clause may touch (0: all, less the umask)
	ops []modeOp
}

type modeOp struct {
	op    byte   // '+', '-' or '='
	perm  uint32 // r, w, x, s, t as bits of every class (masked by who)
	x     bool   // X: execute if a directory or some execute bit is set
	copy  uint32 // u, g or o: copy that class's bits (0o700, 0o070, 0o007)
	hasCP bool
}

const (
	whoU   = 0o4700
	whoG   = 0o2070
	whoO   = 0o1007
	whoAll = whoU | whoG | whoO
)

// parseMode reads a MODE; umask is what a symbolic clause without [ugoa]
// leaves alone (the process's, as coreutils).
func parseMode(s string, umask uint32) (modeSpec, error) {
	bad := func() (modeSpec, error) {
		return modeSpec{}, usagef("invalid mode: '%s'", s)
	}
	if s == "" {
		return bad()
	}
	if strings.Trim(s, "01234567") == "" {
		m, err := strconv.ParseUint(s, 8, 32)
		if err != nil || m > 0o7777 {
			return bad()
		}
		return modeSpec{octal: true, mode: uint32(m), digits: len(s)}, nil
	}
	sp := modeSpec{umask: umask}
	for _, clause := range strings.Split(s, ",") {
		var c modeClause
		i := 0
		for ; i < len(clause) && strings.IndexByte("ugoa", clause[i]) >= 0; i++ {
			c.who |= map[byte]uint32{'u': whoU, 'g': whoG, 'o': whoO, 'a': whoAll}[clause[i]]
		}
		if i == len(clause) {
			return bad()
		}
		for i < len(clause) {
			op := modeOp{op: clause[i]}
			if strings.IndexByte("+-=", op.op) < 0 {
				return bad()
			}
			i++
			if i < len(clause) && strings.IndexByte("ugo", clause[i]) >= 0 {
				op.copy, op.hasCP = map[byte]uint32{'u': 0o700, 'g': 0o070, 'o': 0o007}[clause[i]], true
				i++
			} else {
				for ; i < len(clause) && strings.IndexByte("rwxXst", clause[i]) >= 0; i++ {
					switch clause[i] {
					case 'r':
						op.perm |= 0o444
					case 'w':
						op.perm |= 0o222
					case 'x':
						op.perm |= 0o111
					case 'X':
						op.x = true
					case 's':
						op.perm |= 0o6000
					case 't':
						op.perm |= 0o1000
					}
				}
			}
			if i < len(clause) && strings.IndexByte("+-=", clause[i]) < 0 {
				return bad()
			}
			c.ops = append(c.ops, op)
		}
		sp.clauses = append(sp.clauses, c)
	}
	return sp, nil
}

// apply returns the new permission bits (and set-id, sticky) of a file
// whose are old; dir says whether it is a directory.
func (sp modeSpec) apply(old uint32, dir bool) uint32 {
	old &= 0o7777
	if sp.octal {
		m := sp.mode
		// GNU: fewer than 5 digits keep a directory's set-id bits.
		if dir && sp.digits < 5 {
			m |= old & 0o6000
		}
		return m
	}
	m := old
	for _, c := range sp.clauses {
		who, masked := c.who, false
		if who == 0 {
			who, masked = whoAll, true
		}
		for _, op := range c.ops {
			var bits uint32
			switch {
			case op.hasCP:
				v := m & op.copy
				// Spread the class's three bits to every class.
				switch op.copy {
				case 0o700:
					v >>= 6
				case 0o070:
					v >>= 3
				}
				bits = v * 0o111
			default:
				bits = op.perm
				if op.x && (dir || m&0o111 != 0) {
					bits |= 0o111
				}
			}
			bits &= who
			if masked {
				bits &^= sp.umask
			}
			switch op.op {
			case '+':
				m |= bits
			case '-':
				m &^= bits
			case '=':
				// The class's bits all go, umask or not; what is set
				// is masked by it.
				clear := who
				// GNU: a directory's set-id bits stay unless named.
				if dir {
					clear &^= 0o6000 &^ bits
				}
				m = m&^clear | bits
			}
		}
	}
	return m
}

// mkdirMode is the mode GNU mkdir -m gives a new directory: an octal MODE
// exactly; a symbolic one changes a=rwx (S_IRWXUGO), and where it names
// no permission bit and sets no set-id bit the umask still applies to
// what it made (mkdir -m +t under umask 022 gives 1755, mkdir -m u+x
// 0777: coreutils' mkdir chmods after mkdir(2) only then).
func (sp modeSpec) mkdirMode(umask uint32) uint32 {
	if sp.octal {
		return sp.mode
	}
	m := sp.apply(0o777, true)
	if sp.touches()&0o777 != 0 || m&0o6000 != 0 {
		return m
	}
	return m &^ umask
}

// touches is every bit a symbolic mode's clauses may change (coreutils'
// mode_bits).
func (sp modeSpec) touches() uint32 {
	var t uint32
	for _, c := range sp.clauses {
		who, masked := c.who, false
		if who == 0 {
			who, masked = whoAll, true
		}
		for _, op := range c.ops {
			bits := op.perm
			if op.x || op.hasCP {
				bits |= 0o111
			}
			if op.hasCP {
				bits |= 0o666
			}
			if op.op == '=' {
				bits = whoAll
			}
			bits &= who
			if masked {
				bits &^= sp.umask
			}
			t |= bits
		}
	}
	return t
}
