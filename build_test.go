//go:build linux

package ext4go_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

var (
	buildUUID = [16]byte{1, 2, 3, 4, 5, 6, 0x47, 8, 0x89, 10, 11, 12, 13, 14, 15, 16}
	buildSeed = [16]byte{16, 15, 14, 13, 12, 11, 0x4a, 9, 0x88, 7, 6, 5, 4, 3, 2, 1}
	buildTime = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
)

// buildImage makes an image of src with Mkfs + AddDir (or AddTar when tr
// is set), closes it and returns its path.
func buildImage(t *testing.T, src string, tr io.Reader, size int64, bs int) string {
	t.Helper()
	return buildImageWorkers(t, src, tr, size, bs, 0)
}

// buildImageWorkers is buildImage with BuildOptions.Workers set.
func buildImageWorkers(t *testing.T, src string, tr io.Reader, size int64, bs, workers int) string {
	t.Helper()
	return buildImageOpts(t, src, tr, ext4go.MkfsOptions{Size: size, BlockSize: bs}, workers)
}

// buildImageOpts is buildImage with the filesystem made with mo.
func buildImageOpts(t *testing.T, src string, tr io.Reader, mo ext4go.MkfsOptions, workers int) string {
	t.Helper()
	image := filepath.Join(t.TempDir(), "built.img")
	mo.UUID, mo.HashSeed, mo.CreationTime = buildUUID, buildSeed, buildTime
	err := ext4go.Mkfs(image, mo)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.OpenForBuild(image)
	if err != nil {
		t.Fatal(err)
	}
	bo := &ext4go.BuildOptions{UID: -1, GID: -1, Time: buildTime, Workers: workers}
	if tr != nil {
		err = fsys.AddTar(".", tr, bo)
	} else {
		err = fsys.AddDir(".", src, bo)
	}
	if err != nil {
		fsys.Close()
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	return image
}

func TestBuildFromDir(t *testing.T) {
	for _, c := range []struct {
		name   string
		bs     int
		fsType string
	}{{"4k", 4096, ""}, {"1k", 1024, ""}, {"4k-ext3", 4096, "ext3"}, {"1k-ext2", 1024, "ext2"}} {
		bs := c.bs
		t.Run(c.name, func(t *testing.T) {
			src := testutil.SourceDir(t)
			testutil.GenTree(t, src, testutil.TreeSpec{Preset: "all", Seed: 7, BlockSize: bs})
			image := buildImageOpts(t, src, nil, ext4go.MkfsOptions{Size: 256 << 20, BlockSize: bs, FsType: c.fsType}, 0)
			testutil.RequireFsckClean(t, image)
			co := testutil.MountCompareOptions()
			co.Meta = meta
			if drops, why := testutil.StatDropsNanoseconds(); drops {
				t.Logf("comparing times in whole seconds: %s", why)
				co.TimeGranularity = time.Second
			}
			testutil.CompareFS(t, openImage(t, image), src, co)
			if ok, _ := testutil.CanMount(); !ok {
				return
			}
			mnt := testutil.Mount(t, image, true)
			testutil.CompareDirs(t, mnt, src, testutil.MountCompareOptions())
		})
	}
}

// TestBuildKernelWritesMore: the kernel mounts a built image read-write,
// sees what we wrote, adds files; e2fsck stays clean and we read the
// kernel's files back.
func TestBuildKernelWritesMore(t *testing.T) {
	testutil.RequireMount(t)
	src := testutil.SourceDir(t)
	testutil.GenTree(t, src, testutil.TreeSpec{Preset: "small", Seed: 8})
	image := buildImage(t, src, nil, 64<<20, 4096)
	data := bytes.Repeat([]byte("kernel"), 300000)
	t.Run("kernel", func(t *testing.T) {
		mnt := testutil.Mount(t, image, false)
		testutil.CompareDirs(t, mnt, src, testutil.MountCompareOptions())
		if err := os.WriteFile(filepath.Join(mnt, "from-kernel"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(mnt, "kdir/a/b"), 0o755); err != nil {
			t.Fatal(err)
		}
	})
	testutil.RequireFsckClean(t, image)
	got, err := openImage(t, image).ReadFile("from-kernel")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("kernel's file reads back wrong (err %v)", err)
	}
}

func TestBuildReproducible(t *testing.T) {
	src := testutil.SourceDir(t)
	testutil.GenTree(t, src, testutil.TreeSpec{Preset: "large", Seed: 9})
	// Read every file and directory first: with relatime a read moves the
	// source's atimes, which a build copies. Twice, a tick apart: GenTree's
	// utimes set each ctime to now, and a first read within the same
	// clock tick leaves atime == ctime, which relatime updates again on
	// the next read (the build's).
	for range 2 {
		filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				os.ReadFile(p)
			}
			if err == nil && d.Type()&fs.ModeSymlink != 0 {
				os.Readlink(p) // readlink moves a symlink's atime too
			}
			return nil
		})
		time.Sleep(50 * time.Millisecond)
	}
	a := buildImage(t, src, nil, 128<<20, 4096)
	b := buildImage(t, src, nil, 128<<20, 4096)
	if ha, hb := fileHash(t, a), fileHash(t, b); ha != hb {
		t.Fatalf("two builds differ: %x vs %x", ha, hb)
	}
	// The read-ahead and the copying workers run in any order; the
	// allocation order, and so the image, must not depend on them.
	c := buildImageWorkers(t, src, nil, 128<<20, 4096, 1)
	if ha, hc := fileHash(t, a), fileHash(t, c); ha != hc {
		t.Fatalf("a build with one worker differs: %x vs %x", ha, hc)
	}
}

func fileHash(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// writeTar archives src (GNU/PAX format, xattrs as SCHILY records, hard
// links as link entries).
func writeTar(t *testing.T, w io.Writer, src string) {
	t.Helper()
	tw := tar.NewWriter(w)
	seen := map[[2]uint64]string{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == src {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSocket != 0 {
			return nil // tar cannot hold sockets
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		hdr.Name = rel
		hdr.Format = tar.FormatPAX
		st := fi.Sys().(*syscall.Stat_t)
		hdr.AccessTime = time.Unix(st.Atim.Unix())
		if fi.Mode().IsRegular() && st.Nlink > 1 {
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := seen[key]; ok {
				hdr.Typeflag = tar.TypeLink
				hdr.Linkname = first
				hdr.Size = 0
			} else {
				seen[key] = rel
			}
		}
		if n, _ := unix.Llistxattr(p, nil); n > 0 {
			buf := make([]byte, n)
			n, _ = unix.Llistxattr(p, buf)
			for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
				v := make([]byte, 65536)
				vn, err := unix.Lgetxattr(p, name, v)
				if err != nil {
					continue
				}
				if hdr.PAXRecords == nil {
					hdr.PAXRecords = map[string]string{}
				}
				hdr.PAXRecords["SCHILY.xattr."+name] = string(v[:vn])
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestBuildFromTar(t *testing.T) {
	src := testutil.SourceDir(t)
	for _, p := range []string{"small", "links", "xattrs", "modes", "special", "odd"} {
		testutil.GenTree(t, filepath.Join(src, p), testutil.TreeSpec{Preset: p, Seed: 10})
	}
	for _, comp := range []string{"plain", "gzip", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			var buf bytes.Buffer
			switch comp {
			case "plain":
				writeTar(t, &buf, src)
			case "gzip":
				zw := gzip.NewWriter(&buf)
				writeTar(t, zw, src)
				zw.Close()
			case "zstd":
				zw, _ := zstd.NewWriter(&buf)
				writeTar(t, zw, src)
				zw.Close()
			}
			image := buildImage(t, "", &buf, 64<<20, 4096)
			testutil.RequireFsckClean(t, image)
			co := testutil.MountCompareOptions()
			co.Meta = meta
			co.Checks &^= testutil.CheckAtime
			co.IgnoreMissing = fs.ModeSocket
			testutil.CompareFS(t, openImage(t, image), src, co)
		})
	}
}

func TestBuildTarRefusesEscape(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o644})
	tw.Close()
	image := filepath.Join(t.TempDir(), "img")
	if err := ext4go.Mkfs(image, ext4go.MkfsOptions{Size: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.OpenForBuild(image)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.AddTar(".", &buf, nil); err == nil {
		t.Fatal("tar with ../ accepted")
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

// TestBuildTarReplaces: a later tar entry replaces an earlier one of the
// same name even while the earlier file's data is still being copied (its
// blocks are freed and reused), sparse and multi-chunk files included.
func TestBuildTarReplaces(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}
	sparse := make([]byte, 3<<20) // a hole in the middle chunk
	copy(sparse, data(100<<10))
	copy(sparse[(5<<20)/2:], data(200<<10))
	type entry struct {
		name string
		body []byte
	}
	entries := []entry{
		{"a", data(2<<20 + 123)},
		{"s", sparse},
		{"b", data(5000)},
		{"a", data(3<<20 + 7)}, // replaces a
		{"s", data(4096)},      // replaces s
		{"c", data(1 << 20)},
		{"a", data(10)},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg, ModTime: buildTime}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	image := buildImage(t, "", &buf, 64<<20, 4096)
	testutil.RequireFsckClean(t, image)
	want := map[string][]byte{}
	for _, e := range entries {
		want[e.name] = e.body
	}
	fsys := openImage(t, image)
	for name, body := range want {
		got, err := fs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, body) {
			t.Errorf("%s: %d bytes differ from the last entry's %d", name, len(got), len(body))
		}
	}
}

// TestAddDirHostLoop: a host directory that contains itself (a bind mount
// of an ancestor) is an error, not an endless copy.
func TestAddDirHostLoop(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("bind mounts need root")
	}
	src := t.TempDir()
	inner := filepath.Join(src, "a", "b")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(src, inner, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	defer syscall.Unmount(inner, syscall.MNT_DETACH)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4")
	fsys := openRW(t, image)
	err := fsys.AddDir(".", src, nil)
	if err == nil || !strings.Contains(err.Error(), "contains itself") {
		t.Errorf("AddDir of a looped tree: %v", err)
	}
	closeChecked(t, fsys, image)
}

// TestBuildRecyclesDataBuffers: small files are read into recycled
// buffers that go back to their pool once written. Many small files of
// every buffer class, with distinct content, some with holes (several
// runs, whose pieces may land in different batches), built twice in one
// process with 1 KiB blocks: a buffer given back before its data was
// written would show as another file's bytes.
func TestBuildRecyclesDataBuffers(t *testing.T) {
	src := testutil.SourceDir(t)
	rnd := rand.New(rand.NewPCG(5, 9))
	for d := 0; d < 8; d++ {
		dir := filepath.Join(src, "d"+string(rune('a'+d)))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 300; i++ {
			size := 1 + rnd.IntN(64<<10)
			data := make([]byte, size)
			for j := range data {
				data[j] = byte(rnd.Uint32())
			}
			p := filepath.Join(dir, "f"+strconv.Itoa(i))
			if i%10 == 9 && size > 12<<10 {
				// Data at both ends and a hole between.
				f, err := os.Create(p)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt(data[:2<<10], 0); err == nil {
					_, err = f.WriteAt(data[size-(2<<10):], int64(size-(2<<10)))
				}
				if err := errors.Join(err, f.Close()); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for round := 0; round < 2; round++ {
		image := buildImageOpts(t, src, nil, ext4go.MkfsOptions{Size: 256 << 20, BlockSize: 1024}, 4)
		testutil.RequireFsckClean(t, image)
		testutil.CompareFS(t, openImage(t, image), src, testutil.CompareOptions{SkipPaths: []string{"lost+found"}})
	}
}

// TestBuildKeepsHoles: a built file has no more blocks than its source
// (plus one for an extent tree block), so holes stay holes, whether the
// build finds them by SEEK_DATA or knows from st_blocks there are none.
func TestBuildKeepsHoles(t *testing.T) {
	src := testutil.SourceDir(t)
	testutil.GenTree(t, src, testutil.TreeSpec{Preset: "sparse", Seed: 3, BlockSize: 4096})
	image := buildImage(t, src, nil, 256<<20, 4096)
	testutil.RequireFsckClean(t, image)
	fsys := openImage(t, image)
	checked := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		fi, err := fsys.Lstat(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		got := fi.Sys().(*ext4go.Stat).Blocks
		if got > st.Blocks+8 {
			t.Errorf("%s: %d sectors in the image, %d in the source", rel, got, st.Blocks)
		}
		if st.Blocks*512 < st.Size {
			checked++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("the tree has no sparse file")
	}
}

// syncCountingDev is an image device whose SyncData (the build's syncs as
// it goes) is counted and fails with err when set.
type syncCountingDev struct {
	ext4go.Device
	syncs atomic.Int32
	err   error
}

func (d *syncCountingDev) SyncData() error {
	d.syncs.Add(1)
	return d.err
}

// TestBuildSyncsAsItGoes: a build waits for its data to be durable every
// 32 MiB, on a worker, so that the final fsync is short, and the image is
// whole (e2fsck, the library and the kernel read the source back); an
// error of such a sync fails the build (fsync would not report it a
// second time).
func TestBuildSyncsAsItGoes(t *testing.T) {
	src := testutil.SourceDir(t)
	data := make([]byte, 9<<20)
	for i := 0; i < 5; i++ {
		data[0] = byte(i)
		if err := os.WriteFile(filepath.Join(src, "big"+strconv.Itoa(i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, fail := range []bool{false, true} {
		image := filepath.Join(t.TempDir(), "img")
		if err := ext4go.Mkfs(image, ext4go.MkfsOptions{Size: 128 << 20}); err != nil {
			t.Fatal(err)
		}
		d, err := ext4go.OpenImageDevice(image, true)
		if err != nil {
			t.Fatal(err)
		}
		sd := &syncCountingDev{Device: d}
		if fail {
			sd.err = syscall.EIO
		}
		fsys, err := ext4go.OpenDeviceForBuild(sd)
		if err != nil {
			t.Fatal(err)
		}
		err = fsys.AddDir(".", src, &ext4go.BuildOptions{UID: -1, GID: -1, Workers: 2})
		cerr := fsys.Close()
		if sd.syncs.Load() == 0 {
			t.Errorf("fail=%v: 45 MiB built without a sync", fail)
		}
		if !fail {
			if err != nil || cerr != nil {
				t.Fatal(err, cerr)
			}
			testutil.RequireFsckClean(t, image)
			testutil.CompareFS(t, openImage(t, image), src, testutil.CompareOptions{SkipPaths: []string{"lost+found"}})
			if ok, _ := testutil.CanMount(); ok {
				testutil.CompareDirs(t, testutil.Mount(t, image, true), src, testutil.MountCompareOptions())
			}
			continue
		}
		if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "syncing the image") {
			t.Errorf("a failed sync: AddDir returned %v", err)
		}
	}
}
