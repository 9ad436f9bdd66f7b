//go:build linux

package testutil

import (
	"slices"
	"strings"
	"testing"
)

func TestParseCatalog(t *testing.T) {
	good := "name\tbytes\tblocksize\te2fsck_fn_exit\tkernel_ro_mount\tfeatures\tcontents\n" +
		"a\t1024\t4096\t0\tyes\text_attr dir_index\thtree=0\n" +
		"b\t2048\t\t4\t-\t\tx=1\n"
	imgs, err := parseCatalog(strings.NewReader(good), "/d")
	if err != nil || len(imgs) != 2 {
		t.Fatalf("parseCatalog = %v, %v", imgs, err)
	}
	a := imgs[0]
	if a.Name != "a" || a.Path != "/d/a.img.gz" || a.Bytes != 1024 || a.BlockSize != 4096 ||
		a.FsckExit != 0 || a.KernelMounts != "yes" || !slices.Equal(a.Features, []string{"ext_attr", "dir_index"}) ||
		a.Contents != "htree=0" || !a.HasFeature("dir_index") || a.HasFeature("extent") {
		t.Errorf("row a = %+v", a)
	}
	if imgs[1].BlockSize != 0 || imgs[1].FsckExit != 4 || len(imgs[1].Features) != 0 {
		t.Errorf("row b = %+v", imgs[1])
	}
	for _, bad := range []string{
		"h\na\t1\t2\n",
		"h\na\tx\t4096\t0\tyes\tf\tc\n",
		"h\na\t1\tx\t0\tyes\tf\tc\n",
		"h\na\t1\t4096\tx\tyes\tf\tc\n",
	} {
		if _, err := parseCatalog(strings.NewReader(bad), "/d"); err == nil {
			t.Errorf("parseCatalog(%q) succeeded", bad)
		}
	}
}

// TestSharedImages: the catalogue reads, decompression is exact, and for a
// few clean images our tools agree with the catalogue and with each other:
// e2fsck's verdict, dumpe2fs's features, and the kernel mount against
// debugfs rdump (the two read oracles later tests use).
func TestSharedImages(t *testing.T) {
	imgs := SharedImages(t)
	if len(imgs) < 200 {
		t.Fatalf("%d catalogued images", len(imgs))
	}
	var clean, broken []SharedImage
	for _, im := range imgs {
		switch {
		// debugfs 1.47.0 rdump (and cat) write inline-data files with
		// the whole 60-byte inline area instead of i_size bytes, so rdump
		// is no oracle for inline_data images.
		case im.FsckExit == 0 && im.KernelMounts == "yes" && im.Bytes <= 8<<20 && !im.HasFeature("inline_data"):
			clean = append(clean, im)
		case im.FsckExit == 4 && im.Bytes <= 2<<20:
			broken = append(broken, im)
		}
	}
	if len(clean) < 3 || len(broken) < 1 {
		t.Fatalf("catalogue has %d small clean and %d small broken images", len(clean), len(broken))
	}
	if exit, out := E2fsckFN(t, broken[0].Decompress(t)); exit != 4 {
		t.Errorf("%s: e2fsck -fn exit %d, catalogue says 4\n%s", broken[0].Name, exit, out)
	}
	for _, im := range clean[:3] {
		t.Run(im.Name, func(t *testing.T) {
			img := im.Decompress(t)
			RequireFsckClean(t, img)
			h := Dumpe2fs(t, img, "-h")
			for _, f := range im.Features {
				if !strings.Contains(h, " "+f) {
					t.Errorf("dumpe2fs -h lacks feature %q", f)
				}
			}
			if ok, _ := CanMount(); !ok {
				return
			}
			mp := Mount(t, img, true)
			out := t.TempDir()
			DebugfsRdump(t, img, "/", out)
			opts := RdumpCompareOptions()
			opts.SkipPaths = nil
			CompareDirs(t, out, mp, opts)
		})
	}
}
