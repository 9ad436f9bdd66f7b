package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

type root struct{ fs.Inode }

func (r *root) OnAdd(ctx context.Context) {
	ch := r.NewPersistentInode(ctx, &fs.MemRegularFile{Data: make([]byte, 4096), Attr: fuse.Attr{Mode: 0644}}, fs.StableAttr{Ino: 2})
	r.AddChild("file", ch, false)
}

func main() {
	mnt := flag.String("mnt", "/tmp/fuse-uring/mnt", "")
	attr := flag.Duration("attrttl", 0, "")
	single := flag.Bool("single", false, "SingleThreaded")
	flag.Parse()
	et := time.Hour
	opts := &fs.Options{EntryTimeout: &et, AttrTimeout: attr}
	opts.MountOptions.AllowOther = true
	opts.MountOptions.SingleThreaded = *single
	srv, err := fs.Mount(*mnt, &root{}, opts)
	if err != nil {
		panic(err)
	}
	os.Stderr.WriteString("READY\n")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; srv.Unmount() }()
	srv.Wait()
}
