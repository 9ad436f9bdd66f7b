package testutil

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// SharedImage is one row of shared/testdata/e2fsprogs/CATALOG.tsv: an
// image from the e2fsprogs test suite, mostly corrupted on purpose.
type SharedImage struct {
	Name         string   // e.g. "f_16384_block"
	Path         string   // the .img.gz file
	Bytes        int64    // uncompressed size
	BlockSize    int      // 0 if the catalog has none
	FsckExit     int      // exit status of e2fsck -fn 1.47.0; 124 = took over 60 s
	KernelMounts string   // "yes", "no", or "-" (not tried: image not clean)
	Features     []string // superblock features as dumpe2fs prints them
	Contents     string   // inode scan summary, "htree=0 ext_depth_max=0 ..."
}

// maxSharedImage bounds what Decompress writes: the largest catalogued
// image is 80 MiB.
const maxSharedImage = 256 << 20

// SharedDir returns <project root>/../shared/testdata/e2fsprogs, the
// project root being the nearest directory above the current one holding
// go.mod. It skips the test if there is none.
func SharedDir(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir := filepath.Join(d, "..", "shared", "testdata", "e2fsprogs")
			if _, err := os.Stat(filepath.Join(dir, "CATALOG.tsv")); err != nil {
				t.Skipf("testutil: shared e2fsprogs images absent: %v", err)
			}
			return filepath.Clean(dir)
		}
		if filepath.Dir(d) == d {
			t.Skipf("testutil: no go.mod above %s, cannot find shared/", wd)
		}
	}
}

// SharedImages returns the catalogued shared images, skipping the test if
// shared/ is absent.
func SharedImages(t testing.TB) []SharedImage {
	t.Helper()
	dir := SharedDir(t)
	f, err := os.Open(filepath.Join(dir, "CATALOG.tsv"))
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	defer f.Close()
	imgs, err := parseCatalog(f, dir)
	if err != nil {
		t.Fatalf("testutil: CATALOG.tsv: %v", err)
	}
	return imgs
}

// parseCatalog reads CATALOG.tsv: a header line, then
// name bytes blocksize e2fsck_fn_exit kernel_ro_mount features contents.
func parseCatalog(r io.Reader, dir string) ([]SharedImage, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	var out []SharedImage
	for line := 1; sc.Scan(); line++ {
		if line == 1 || sc.Text() == "" {
			continue
		}
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 7 {
			return nil, fmt.Errorf("line %d: %d fields, want 7", line, len(f))
		}
		img := SharedImage{
			Name: f[0], Path: filepath.Join(dir, f[0]+".img.gz"),
			KernelMounts: f[4], Features: strings.Fields(f[5]), Contents: f[6],
		}
		var err error
		if img.Bytes, err = strconv.ParseInt(f[1], 10, 64); err != nil {
			return nil, fmt.Errorf("line %d: bytes: %v", line, err)
		}
		if f[2] != "" && f[2] != "-" {
			if img.BlockSize, err = strconv.Atoi(f[2]); err != nil {
				return nil, fmt.Errorf("line %d: blocksize: %v", line, err)
			}
		}
		if img.FsckExit, err = strconv.Atoi(f[3]); err != nil {
			return nil, fmt.Errorf("line %d: e2fsck exit: %v", line, err)
		}
		out = append(out, img)
	}
	return out, sc.Err()
}

// HasFeature reports whether the image's superblock lists feature.
func (s SharedImage) HasFeature(feature string) bool {
	for _, f := range s.Features {
		if f == feature {
			return true
		}
	}
	return false
}

// Decompress gunzips the image into a new file under t.TempDir() and
// returns its path. It fails the test if the data exceeds the catalogued
// size (or 256 MiB).
func (s SharedImage) Decompress(t testing.TB) string {
	t.Helper()
	in, err := os.Open(s.Path)
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatalf("testutil: %s: %v", s.Path, err)
	}
	limit := int64(maxSharedImage)
	if s.Bytes > 0 && s.Bytes < limit {
		limit = s.Bytes
	}
	dst := filepath.Join(t.TempDir(), s.Name+".img")
	out, err := os.Create(dst)
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	n, err := copySparse(out, io.LimitReader(zr, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		t.Fatalf("testutil: decompress %s: %v", s.Path, err)
	case n > limit:
		t.Fatalf("testutil: %s decompresses to more than %d bytes", s.Path, limit)
	case s.Bytes > 0 && n != s.Bytes:
		t.Fatalf("testutil: %s: %d bytes, catalog says %d", s.Path, n, s.Bytes)
	}
	return dst
}

// copySparse copies r to w leaving holes where r has all-zero 64 KiB
// chunks (most of an image), and returns the bytes copied.
func copySparse(w *os.File, r io.Reader) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		m, err := io.ReadFull(r, buf)
		if m > 0 {
			if isZero(buf[:m]) {
				if _, serr := w.Seek(int64(m), io.SeekCurrent); serr != nil {
					return n, serr
				}
			} else if _, werr := w.Write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n, w.Truncate(n)
		}
		if err != nil {
			return n, err
		}
	}
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
