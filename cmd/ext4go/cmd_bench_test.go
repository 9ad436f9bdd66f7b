package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchAllocJSON(t *testing.T) {
	root := t.TempDir()
	for i, n := range []int{10, 5000, 70000} {
		if err := os.WriteFile(filepath.Join(root, string(rune('a'+i))), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	code := run(&env{stdout: &out, stderr: &errb}, []string{"bench", "alloc", "-p", "1,2", "-duration", "30ms",
		"-size", "2G", "-json", "-root", root})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	seen := map[string]int{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		cfg, _ := m["config"].(string)
		if cfg != "default" && cfg != "legacy" {
			t.Fatalf("line %q: config %v", sc.Text(), m["config"])
		}
		b, _ := m["bench"].(string)
		if _, ok := m["ops_per_sec"]; ok {
			if v, _ := m["ops_per_sec"].(float64); v <= 0 || m["p"] == nil || len(m) != 5 {
				t.Fatalf("throughput row %q", sc.Text())
			}
		} else if _, ok := m["metric"].(string); !ok || m["value"] == nil || len(m) != 5 {
			t.Fatalf("quality row %q", sc.Text())
		}
		seen[b]++
	}
	// Two workers' counts, two configurations, optimize_scan off and on.
	if seen["fallocate2"] != 8 || seen["append"] != 8 || seen["fragmentation"] == 0 || seen["smallfiles"] == 0 {
		t.Fatalf("rows per bench %v", seen)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{{"bench"}, {"bench", "nope"}, {"bench", "alloc", "-p", "0"},
		{"bench", "alloc", "-optimize-scan", "maybe"}, {"bench", "alloc", "-run", "x"}, {"bench", "alloc", "extra"}} {
		var out, errb bytes.Buffer
		if code := run(&env{stdout: &out, stderr: &errb}, args); code == 0 || !strings.Contains(errb.String(), "usage:") {
			t.Errorf("%v: exit %d, want a usage error (%s)", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	code := run(&env{stdout: &out, stderr: &errb}, []string{"bench", "alloc", "-legacy", "-p", "1", "-duration", "20ms",
		"-size", "1G", "-run", "fallocate2", "-stats"})
	if code != 0 || !strings.Contains(out.String(), "legacy") || !strings.Contains(out.String(), "reqs:") {
		t.Fatalf("exit %d, output:\n%s%s", code, out.String(), errb.String())
	}
}

func TestBenchHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(&env{stdout: &out, stderr: &errb}, []string{"bench", "-h"}); code != 0 || !strings.Contains(out.String(), "alloc") || errb.Len() != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
}

// TestBenchLazytimeJSON: bench lazytime runs its three configurations and
// prints one JSON row each; bad flags are usage errors.
func TestBenchLazytimeJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(&env{stdout: &out, stderr: &errb}, []string{"bench", "lazytime", "-p", "4", "-duration", "50ms",
		"-file-size", "64K", "-json"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var configs []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r lazytimeResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if r.Bench != "lazytime" || r.P != 4 || r.Ops <= 0 || r.OpsPerSec <= 0 || (r.Config == "blocking") != (r.Wait != "") {
			t.Errorf("row %q", sc.Text())
		}
		configs = append(configs, r.Config)
	}
	if strings.Join(configs, ",") != "off,on,blocking" {
		t.Errorf("configurations %v", configs)
	}
	for _, args := range [][]string{{"-p", "0"}, {"-run", "sometimes"}, {"-file-size", "1K"}, {"extra"}} {
		var out, errb bytes.Buffer
		if code := run(&env{stdout: &out, stderr: &errb}, append([]string{"bench", "lazytime"}, args...)); code == 0 || !strings.Contains(errb.String(), "usage:") {
			t.Errorf("%v: exit %d, want a usage error (%s)", args, code, errb.String())
		}
	}
}
