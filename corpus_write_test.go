//go:build linux

package ext4go_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestCorpusWrite opens every shared e2fsprogs image for writing. An image
// ext4go refuses must be refused with a typed error and left byte for byte
// as it was. On an image it accepts, a round of changes (new directories
// and files, writes, truncates, xattrs, links, renames, removals of new and
// existing entries) must end without a panic or a hang, every error typed;
// and an image e2fsck found clean before must be clean after.
func TestCorpusWrite(t *testing.T) {
	imgs := testutil.SharedImages(t)
	if len(imgs) == 0 {
		t.Skip("no shared images catalogued")
	}
	testutil.RequireTools(t, "e2fsck")
	old := debug.SetMemoryLimit(corpusMemoryLimit)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	var mu sync.Mutex
	outcomes := map[string]int{}
	t.Cleanup(func() {
		keys := make([]string, 0, len(outcomes))
		for k := range outcomes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Logf("%-40s %d images", k, outcomes[k])
		}
	})
	sem := make(chan struct{}, corpusParallel)
	for _, img := range imgs {
		if testing.Short() && !shortSample(img.Name) {
			continue
		}
		t.Run(img.Name, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			outcome := corpusWriteImage(t, img)
			mu.Lock()
			outcomes[outcome]++
			mu.Unlock()
		})
	}
}

func shortSample(name string) bool {
	for _, s := range corpusShortSample {
		if s == name {
			return true
		}
	}
	return false
}

func corpusWriteImage(t *testing.T, img testutil.SharedImage) string {
	image := img.Decompress(t)
	before := fileHash(t, image)
	var prog atomic.Int64
	done := make(chan string, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Sprintf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		done <- corpusWriteRound(image, &prog)
	}()
	res := awaitProgress(t, done, &prog, corpusStall, corpusTimeout)
	switch {
	case len(res) > 6 && res[:6] == "panic:":
		t.Fatal(res)
	case len(res) > 5 && res[:5] == "FAIL:":
		t.Fatal(res[5:])
	case res == "refused":
		if after := fileHash(t, image); after != before {
			t.Fatal("a refused open changed the image")
		}
		return "refused (typed error, image unchanged)"
	}
	if img.FsckExit != 0 {
		return "changed (was not clean)"
	}
	if why, ok := corpusWriteExceptions[img.Name]; ok {
		t.Logf("e2fsck not required clean after our changes: %s", why)
		return "changed (corrupt in a way e2fsck 1.47.0 misses)"
	}
	if code, out := testutil.E2fsckFN(t, image); code != 0 {
		t.Fatalf("e2fsck -fn after our changes to a clean image: exit %d\n%s", code, out)
	}
	return "changed, e2fsck clean"
}

// corpusWriteExceptions are images e2fsck 1.47.0 passes although they are
// corrupt, where a correct change exposes the corruption.
var corpusWriteExceptions = map[string]string{
	"f_ea_inode_dir_ref": "directory entry xlink names inode 13, the EA inode holding xfile's xattr value " +
		"(the kernel refuses such an entry: \"EA inode in directory\"); removing xfile drops the value's " +
		"last reference and frees inode 13, as the kernel does, leaving xlink dangling",
}

// corpusWriteRound applies the round of changes. It returns "refused",
// "done", or "FAIL:" and why.
func corpusWriteRound(image string, prog *atomic.Int64) string {
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, AllowUnclean: true})
	if err != nil {
		if !writeTypedErr(err) {
			return fmt.Sprintf("FAIL:open: untyped error %T: %v", err, err)
		}
		return "refused"
	}
	var fails []string
	check := func(what string, err error) {
		prog.Add(1)
		if err != nil && !writeTypedErr(err) {
			fails = append(fails, fmt.Sprintf("%s: untyped error %T: %v", what, err, err))
		}
	}
	check("mkdir", fsys.MkdirAll("ext4go-w/a/b", 0o755))
	data := bytes.Repeat([]byte("ext4go corpus write "), 5000)
	if f, err := fsys.Create("ext4go-w/a/b/file"); err == nil {
		_, err = f.Write(data)
		check("write", err)
		_, err = f.WriteAt(data[:3000], 1<<20)
		check("sparse write", err)
		check("truncate", f.Truncate(50000))
		check("close", f.Close())
	} else {
		check("create", err)
	}
	check("symlink", fsys.Symlink("b/file", "ext4go-w/a/link"))
	check("xattr", fsys.SetXattr("ext4go-w/a/b/file", "user.ext4go", []byte("v"), 0))
	check("link", fsys.Link("ext4go-w/a/b/file", "ext4go-w/hard"))
	check("rename", fsys.Rename("ext4go-w/a/b", "ext4go-w/c"))
	check("remove", fsys.Remove("ext4go-w/hard"))
	// Existing entries: remove the first regular file and the first empty
	// directory of the root, append to another file.
	if entries, err := fsys.ReadDir("."); err == nil {
		removed, appended := false, false
		for _, e := range entries {
			if e.Name() == "ext4go-w" || e.Name() == "lost+found" {
				continue
			}
			switch {
			case e.Type().IsRegular() && !removed:
				check("remove existing", fsys.Remove(e.Name()))
				removed = true
			case e.Type().IsRegular() && !appended:
				if f, err := fsys.OpenFile(e.Name(), os.O_WRONLY|os.O_APPEND, 0); err == nil {
					_, err = f.Write([]byte("more"))
					check("append existing", err)
					check("close existing", f.Close())
				} else {
					check("open existing", err)
				}
				appended = true
			case e.IsDir():
				check("remove dir", ignore(fsys.Remove(e.Name()), syscall.ENOTEMPTY))
			}
		}
	} else {
		check("readdir", err)
	}
	check("removeall", fsys.RemoveAll("ext4go-w"))
	check("close fs", fsys.Close())
	if len(fails) > 0 {
		return "FAIL:" + fmt.Sprint(fails)
	}
	return "done"
}

func ignore(err, want error) error {
	if errors.Is(err, want) {
		return nil
	}
	return err
}

// writeTypedErr is typedErr plus the conditions a change can meet: a full
// disk, a read-only or aborted filesystem, names in use.
func writeTypedErr(err error) bool {
	if typedErr(err) {
		return true
	}
	for _, target := range []error{
		syscall.ENOSPC, syscall.EEXIST, syscall.ENOTEMPTY, syscall.EMLINK, syscall.EFBIG, syscall.EPERM,
		syscall.EOPNOTSUPP, syscall.ENAMETOOLONG, ext4go.ErrReadOnly, ext4go.ErrBusy, fs.ErrExist, fs.ErrPermission,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
