//go:build linux

package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestModeMatchesGNUChmod: every MODE, octal or symbolic, gives on a file
// and on a directory of several modes what GNU chmod gives on the host
// (umask 022), and mkdir -m what GNU mkdir -m gives.
func TestModeMatchesGNUChmod(t *testing.T) {
	if _, err := exec.LookPath("chmod"); err != nil {
		t.Skip("no chmod")
	}
	modes := []string{"755", "0644", "4755", "02755", "00755", "u+x", "+x", "a+X", "go-w", "u=rw,go=r", "=r",
		"g=u", "o=g", "u+s", "g+s", "+t", "o+t", "a-rwx,u+rwX", "ug+rw", "u-x,g+x", "=", "o-rwx", "+s", "a=rwxst",
		"u=rwx,g=rx,o=", "g-s", "u+w,a-w", "-x"}
	starts := []uint32{0o644, 0o755, 0o600, 0o4755, 0o2775, 0o1777, 0o000}
	dir := t.TempDir()
	var script strings.Builder
	script.WriteString("umask 022\n")
	type result struct {
		mode  string
		start uint32
		isDir bool
	}
	var order []result
	for i, m := range modes {
		for j, st := range starts {
			for _, isDir := range []bool{false, true} {
				p := filepath.Join(dir, fmt.Sprintf("f%d-%d-%v", i, j, isDir))
				if isDir {
					fmt.Fprintf(&script, "mkdir %s\n", p)
				} else {
					fmt.Fprintf(&script, ": > %s\n", p)
				}
				fmt.Fprintf(&script, "chmod %04o %s && chmod -- '%s' %s && stat -c %%a %s || echo ERR\n", st, p, m, p, p)
				order = append(order, result{m, st, isDir})
			}
		}
	}
	for i, m := range modes {
		p := filepath.Join(dir, fmt.Sprintf("mkdir-%d", i))
		fmt.Fprintf(&script, "mkdir -m '%s' %s && stat -c %%a %s || echo ERR\n", m, p, p)
	}
	out, err := exec.Command("sh", "-c", script.String()).Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(order)+len(modes) {
		t.Fatalf("%d lines from chmod, want %d", len(lines), len(order)+len(modes))
	}
	for k, r := range order {
		want, err := strconv.ParseUint(lines[k], 8, 32)
		if err != nil {
			t.Fatalf("chmod %s: %q", r.mode, lines[k])
		}
		sp, err := parseMode(r.mode, 0o022)
		if err != nil {
			t.Errorf("%q: %v", r.mode, err)
			continue
		}
		if got := sp.apply(r.start, r.isDir); got != uint32(want) {
			t.Errorf("chmod %q on a %s of mode %04o: %04o, GNU chmod %04o", r.mode, map[bool]string{true: "directory", false: "file"}[r.isDir], r.start, got, want)
		}
	}
	for i, m := range modes {
		want, err := strconv.ParseUint(lines[len(order)+i], 8, 32)
		if err != nil {
			continue
		}
		sp, _ := parseMode(m, 0o022)
		if got := sp.mkdirMode(0o022); got != uint32(want) {
			t.Errorf("mkdir -m %q: %04o, GNU mkdir %04o", m, got, want)
		}
	}
	for _, bad := range []string{"", "u+q", "8", "17777", "u", "+x,", "ux", "a+r=wz"} {
		if _, err := parseMode(bad, 0o022); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
