package lockstat

import "testing"

func TestLockstatCounts(t *testing.T) {
	var mu Mutex[MFSSuper]
	var rw RWMutex[MBuffer]
	before := Snapshot()
	mu.Lock()
	mu.Unlock()
	if mu.TryLock() {
		mu.Unlock()
	}
	rw.RLock()
	rw.RUnlock()
	Count(TxnDirtyCount)
	got := Snapshot().Sub(before)
	want := Counts{}
	if Enabled {
		want[FSSuper], want[Buffer], want[TxnDirtyCount] = 2, 1, 1
	}
	if got != want {
		t.Fatalf("counts %v, want %v", got, want)
	}
	for _, s := range Sites() {
		if s.Name() == "" {
			t.Errorf("site %d has no name", s)
		}
	}
}
