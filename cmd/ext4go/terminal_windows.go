package main

import (
	"os"

	"golang.org/x/sys/windows"
)

// fileIsTerminal: a console has a console mode.
func fileIsTerminal(f *os.File) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) == nil
}
