//go:build !linux && !darwin && !freebsd && !windows

package main

import "os"

// fileIsTerminal is false: there is no way known here to ask (WASI has no
// terminals to ask about), so no progress bar is drawn.
func fileIsTerminal(*os.File) bool { return false }
