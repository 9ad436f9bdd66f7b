//go:build !linux && !darwin && !freebsd

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"github.com/ext4go/ext4go/internal/host"
)

// put copies the host file or tree src into the image with cp -r
// semantics, as put_unix.go, reading the host by path through os: what
// this system keeps of a file is host.FromFileInfo's (no owners: new
// entries belong to 0:0; os's permission bits; no device nodes; no
// extended attributes; hard links where the system tells identities).
// Holes are not searched for: a sparse host file is copied as the zeros
// it reads as.
func (p *putter) put(src, dst string) error {
	clean := filepath.Clean(src)
	root := clean == filepath.VolumeName(clean)+string(filepath.Separator)
	merge := clean == "." || root || strings.HasSuffix(src, "/.") || strings.HasSuffix(src, string(filepath.Separator)+".")
	base := filepath.Base(clean)
	if root {
		base = "."
	}
	fi, err := os.Lstat(clean)
	if err != nil {
		return failf("cannot stat host file", src, err)
	}
	st := host.FromFileInfo(fi)
	if merge && st.Type() != host.IFDIR {
		return failf("cannot stat host file", src, syscall.ENOTDIR)
	}
	target := imagePath(dst)
	if !merge && isDir(p.fsys, target) {
		target = joinImage(target, base)
	}
	p.errs = 0
	if err := p.copy(clean, src, target, &st); err != nil {
		return err
	}
	if p.errs > 0 {
		return fmt.Errorf("%s of %s could not be copied", countOf(p.errs, "entry", "entries"), quotePath(src))
	}
	return nil
}

// copy copies the host file at path (shown as srcShown in messages) to
// the image name dst.
func (p *putter) copy(path, srcShown, dst string, st *host.Stat) error {
	if st.Type() == host.IFDIR {
		return p.copyDir(path, srcShown, dst, st)
	}
	var f *os.File
	if st.Type() == host.IFREG {
		var err error
		if f, err = os.Open(path); err != nil {
			return failf("cannot open host file", srcShown, err)
		}
		defer f.Close()
		if err := host.FileID(f, st); err != nil { // Windows: its links
			return failf("cannot stat host file", srcShown, err)
		}
	}
	linked := st.HasID && st.Nlink > 1
	key := [2]uint64{st.Dev, st.Ino}
	if linked {
		if first, ok := p.links[key]; ok {
			if err := p.clear(dst); err != nil {
				return err
			}
			if err := p.fsys.Link(first, dst); err != nil {
				return failf("cannot create hard link", displayPath(dst), err)
			}
			return nil
		}
	}
	if err := p.clear(dst); err != nil {
		return err
	}
	var err error
	switch st.Type() {
	case host.IFREG:
		err = p.copyFile(f, srcShown, dst, st)
	case host.IFLNK, 0:
		// 0: a kind os does not name, such as a Windows junction, kept
		// as the symbolic link it resembles if it reads as one.
		target, rerr := os.Readlink(path)
		if rerr != nil {
			return failf("cannot read host symbolic link", srcShown, rerr)
		}
		st.Mode = host.IFLNK | 0o777
		if err = p.fsys.Symlink(filepath.ToSlash(target), dst); err != nil {
			return failf("cannot create symbolic link", displayPath(dst), err)
		}
		err = p.setMeta(dst, srcShown, st, nil)
	default:
		return fmt.Errorf("cannot copy %s: devices, fifos and sockets are not read on %s", quotePath(srcShown), runtime.GOOS)
	}
	if err != nil {
		return err
	}
	if linked {
		p.links[key] = dst
	}
	return nil
}

func (p *putter) copyDir(path, srcShown, dst string, st *host.Stat) error {
	if err := p.makeDir(dst, srcShown); err != nil {
		return err
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return failf("cannot read host directory", srcShown, err)
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	for _, n := range names {
		childShown := strings.TrimSuffix(srcShown, "/") + "/" + n
		child := filepath.Join(path, n)
		fi, err := os.Lstat(child)
		if err == nil {
			cst := host.FromFileInfo(fi)
			err = p.copy(child, childShown, joinImage(dst, n), &cst)
		} else {
			err = failf("cannot stat", childShown, err)
		}
		if err != nil {
			if fatal(err) {
				return err
			}
			p.report(err)
			p.errs++
		}
	}
	return p.setMeta(dst, srcShown, st, nil)
}

func (p *putter) copyFile(src *os.File, srcShown, dst string, st *host.Stat) error {
	f, err := p.fsys.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return failf("cannot create", displayPath(dst), err)
	}
	for off := int64(0); err == nil && off < st.Size; {
		n := min(int64(len(p.buf)), st.Size-off)
		m, rerr := src.ReadAt(p.buf[:n], off)
		if m > 0 {
			if _, werr := f.WriteAt(p.buf[:m], off); werr != nil {
				err = failf("cannot write", displayPath(dst), werr)
				break
			}
			off += int64(m)
		}
		if rerr == io.EOF {
			break // the file shrank while we copied
		}
		if rerr != nil {
			err = failf("cannot read host file", srcShown, rerr)
		}
	}
	if err == nil {
		if terr := f.Truncate(st.Size); terr != nil {
			err = failf("cannot write", displayPath(dst), terr)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = failf("cannot write", displayPath(dst), cerr)
	}
	if err != nil {
		// As cp: no partial copy is left behind.
		if rerr := p.fsys.Remove(dst); rerr != nil {
			p.report(failf("cannot remove the partial copy", displayPath(dst), rerr))
		}
		return err
	}
	return p.setMeta(dst, srcShown, st, nil)
}
