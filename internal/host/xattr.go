package host

import "strings"

// Xattr is an extended attribute, named as ext4 names it ("user.x",
// "security.capability", "system.posix_acl_access", "trusted.x").
type Xattr struct {
	Name  string
	Value []byte
}

// HasNamespace reports whether name is in one of the namespaces ext4
// keeps (user, trusted, security, system).
func HasNamespace(name string) bool {
	for _, p := range [...]string{"user.", "trusted.", "security.", "system."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
