package host

import "io/fs"

// FromFileInfo converts what os.Lstat gives, where there is no stat(2):
// the type, permission bits, size and modification time, and what the
// system adds in fi.Sys() (fileInfoSys: access times, identities, link
// counts). Owners are 0 (root).
func FromFileInfo(fi fs.FileInfo) Stat {
	s := Stat{Mode: ModeOf(fi.Mode()), Nlink: 1, Size: fi.Size(), Blocks: -1,
		Atime: fi.ModTime(), Mtime: fi.ModTime()}
	fileInfoSys(fi, &s)
	return s
}
