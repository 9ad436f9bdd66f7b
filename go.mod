module github.com/ext4go/ext4go

go 1.26.8

require golang.org/x/sys v0.50.0

require github.com/klauspost/compress v1.20.4

require (
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/hanwen/go-fuse/v2 v2.12.1
)
