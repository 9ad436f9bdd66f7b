//go:build linux

package ext4go_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
)

// FuzzOpenWrite mutates the same base images as FuzzOpenWalk (metadata
// blocks mostly) and opens the result for writing: ext4go must refuse it
// with a typed error and leave it as it was, or make the round of changes
// of TestCorpusWrite with every error typed, without a panic or a hang.
func FuzzOpenWrite(f *testing.F) {
	bases := seedFuzzBases(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		img := mutatedImage(bases, data)
		if img == nil {
			return
		}
		path := filepath.Join(t.TempDir(), "img")
		if err := os.WriteFile(path, img, 0o644); err != nil {
			t.Fatal(err)
		}
		var prog atomic.Int64
		done := make(chan string, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- fmt.Sprintf("FAIL:panic: %v\n%s", p, debug.Stack())
				}
			}()
			done <- corpusWriteRound(path, &prog)
		}()
		res := awaitProgress(t, done, &prog, fuzzTimeout, fuzzTimeout)
		switch {
		case strings.HasPrefix(res, "FAIL:"):
			t.Fatal(res[5:])
		case res == "refused":
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(after, img) {
				t.Fatal("a refused open changed the image")
			}
		}
	})
}
