//go:build darwin || freebsd

package host

import "golang.org/x/sys/unix"

// StatAt is fstatat(2) of name in dirfd, not following a last symlink;
// with name "" it is fstat(2) of dirfd itself. (Only 64-bit builds here:
// their struct stat holds every time.)
func StatAt(dirfd int, name string) (Stat, error) {
	var st unix.Stat_t
	var err error
	if name == "" {
		err = unix.Fstat(dirfd, &st)
	} else {
		err = unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return Stat{}, err
	}
	return FromUnix(&st), nil
}
