module github.com/ext4go/ext4go/research/fuse-uring

go 1.26.0

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	golang.org/x/sys v0.50.0
)
