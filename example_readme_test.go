package ext4go_test

import (
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"

	"github.com/ext4go/ext4go"
)

// Example is the README's "library in ten lines", run: make an image,
// build it from a directory, change it, read it back.
func Example() {
	dir, err := os.MkdirTemp("", "ext4go-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	rootfs := filepath.Join(dir, "rootfs")
	os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755)
	os.WriteFile(filepath.Join(rootfs, "etc", "hostname"), []byte("box\n"), 0o644)
	img := filepath.Join(dir, "disk.img")

	// Make an image and build it from a directory.
	if err := ext4go.Mkfs(img, ext4go.MkfsOptions{Size: 64 << 20}); err != nil {
		log.Fatal(err)
	}
	b, err := ext4go.OpenForBuild(img)
	if err != nil {
		log.Fatal(err)
	}
	if err := b.AddDir(".", rootfs, nil); err != nil {
		log.Fatal(err)
	}
	if err := b.Close(); err != nil {
		log.Fatal(err)
	}

	// Change it.
	w, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		log.Fatal(err)
	}
	page := []byte("<h1>hi</h1>\n")
	if err := w.MkdirAll("srv/www", 0o755); err != nil {
		log.Fatal(err)
	}
	if err := w.WriteFile("srv/www/index.html", page, 0o644); err != nil {
		log.Fatal(err)
	}
	if err := w.Rename("srv/www", "srv/site"); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil { // commits, marks the image clean
		log.Fatal(err)
	}

	// Read it.
	fsys, err := ext4go.Open(img, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer fsys.Close()
	host, _ := fs.ReadFile(fsys, "etc/hostname")
	site, _ := fs.ReadFile(fsys, "srv/site/index.html")
	fi, err := fsys.Lstat("srv/site/index.html")
	if err != nil {
		log.Fatal(err)
	}
	st := fi.Sys().(*ext4go.Stat)
	fmt.Printf("%s%s%#o %d\n", host, site, st.Mode&0o7777, st.Size)
	// Output:
	// box
	// <h1>hi</h1>
	// 0644 12
}
