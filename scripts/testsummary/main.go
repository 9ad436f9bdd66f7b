// Command testsummary reads `go test -json` on standard input and prints
// what a person needs from a long run: each package's result line, the
// whole output of every failed test, every skipped test with its reason,
// and a closing "N passed, N failed, N skipped" line. It exits 1 if any
// test or package failed.
//
//	go test -json ./... | go run ./scripts/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	out := map[string][]string{} // package/test -> its output lines
	var passed, failed, skipped int
	var skips []string
	failedPkg := false
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			fmt.Println(string(line)) // not JSON: a build error, say
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output", "build-output":
			if e.Test == "" && e.Action == "output" {
				// Package-level output: its result line, or what ran outside tests.
				if s := strings.TrimRight(e.Output, "\n"); strings.HasPrefix(s, "ok ") || strings.HasPrefix(s, "FAIL") || strings.HasPrefix(s, "?") || strings.HasPrefix(s, "panic") {
					if s != "FAIL" {
						fmt.Println(s)
					}
					continue
				}
			}
			if e.Action == "build-output" {
				fmt.Print(e.Output)
				continue
			}
			out[key] = append(out[key], e.Output)
		case "pass":
			if e.Test != "" {
				passed++
			}
			delete(out, key)
		case "skip":
			if e.Test != "" {
				skipped++
				reason := ""
				for _, l := range out[key] {
					l = strings.TrimSpace(l)
					if l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- SKIP") {
						reason = l
					}
				}
				skips = append(skips, fmt.Sprintf("  %s %s: %s", e.Package, e.Test, reason))
			}
			delete(out, key)
		case "fail":
			if e.Test == "" {
				failedPkg = true
				for _, l := range out[key] {
					fmt.Print(l)
				}
				delete(out, key)
				continue
			}
			failed++
			fmt.Printf("--- FAIL: %s %s (%.2fs)\n", e.Package, e.Test, e.Elapsed)
			for _, l := range out[key] {
				if !strings.HasPrefix(l, "=== ") {
					fmt.Print(l)
				}
			}
			delete(out, key)
		}
	}
	if len(skips) > 0 {
		fmt.Printf("skipped tests and why:\n%s\n", strings.Join(skips, "\n"))
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || failedPkg {
		os.Exit(1)
	}
}
