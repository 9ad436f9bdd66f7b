//go:build !linux

package main

import (
	"fmt"
	"runtime"
)

// hostManifest reads a kernel mount of an image, which only Linux has.
func hostManifest(root string) ([]string, error) {
	return nil, fmt.Errorf("-walk reads a Linux kernel mount; this is %s", runtime.GOOS)
}

// hostDigest reads a host file by its data ranges, which this program
// finds with Linux's SEEK_DATA.
func hostDigest(name string) (string, error) {
	return "", fmt.Errorf("-digest finds data with Linux's SEEK_DATA; this is %s", runtime.GOOS)
}
