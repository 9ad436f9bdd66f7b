package ext4go_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

func openRW(t testing.TB, image string) *ext4go.FS {
	t.Helper()
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatalf("open %s writable: %v", image, err)
	}
	return fsys
}

// TestWriteBasic creates files, directories and links on a fresh mke2fs
// image and checks e2fsck and the kernel agree with what we wrote.
func TestWriteBasic(t *testing.T) {
	for _, cfg := range []struct {
		name string
		args []string
	}{
		{"4k", []string{"-t", "ext4", "-b", "4096"}},
		{"1k", []string{"-t", "ext4", "-b", "1024"}},
		{"nocsum", []string{"-t", "ext4", "-O", "^metadata_csum,^64bit"}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 64<<20, cfg.args...)
			fsys := openRW(t, image)
			want := t.TempDir()
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(fsys.Mkdir("dir", 0o755))
			must(os.Mkdir(filepath.Join(want, "dir"), 0o755))
			data := bytes.Repeat([]byte("ext4go!"), 100000)
			for i, name := range []string{"a.txt", "dir/b.bin", "dir/empty"} {
				f, err := fsys.Create(name)
				must(err)
				content := data[:len(data)/(i+1)]
				if name == "dir/empty" {
					content = nil
				}
				_, err = f.Write(content)
				must(err)
				must(f.Close())
				must(os.WriteFile(filepath.Join(want, name), content, 0o666))
			}
			must(fsys.Symlink("a.txt", "link"))
			must(os.Symlink("a.txt", filepath.Join(want, "link")))
			long := string(bytes.Repeat([]byte("x"), 200))
			must(fsys.Symlink(long, "dir/longlink"))
			must(os.Symlink(long, filepath.Join(want, "dir/longlink")))
			must(fsys.Link("a.txt", "dir/hard"))
			must(os.Link(filepath.Join(want, "a.txt"), filepath.Join(want, "dir/hard")))
			must(fsys.Close())
			testutil.RequireFsckClean(t, image)
			ro := openImage(t, image)
			testutil.CompareFS(t, ro, want, testutil.CompareOptions{SkipPaths: []string{"lost+found"}})
			if ok, _ := testutil.CanMount(); ok {
				mnt := testutil.Mount(t, image, true)
				testutil.CompareDirs(t, mnt, want, testutil.CompareOptions{SkipPaths: []string{"lost+found"}})
			}
			_ = fs.ErrExist
		})
	}
}
