package bench

import (
	"encoding/json"
	"testing"
	"time"
)

func TestRunsAndRows(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		o := Options{Legacy: legacy, Size: 4 << 30, Stats: true}
		r, err := Fallocate2(o, 3, 0, 3000)
		if err != nil {
			t.Fatal(err)
		}
		if r.OpsPerSec <= 0 || r.P != 3 || r.Config != o.Config() || r.Stats == nil {
			t.Fatalf("row %+v", r)
		}
		b, _ := json.Marshal(r)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil || m["bench"] != "fallocate2" || m["p"] != 3.0 || len(m) != 5 {
			t.Fatalf("json %s: %v", b, err)
		}
		rows, err := Fragmentation(Options{Legacy: legacy, Size: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		if rows[0].Metric != "extents_per_file" || rows[0].Value < 1 {
			t.Fatalf("fragmentation rows %+v", rows)
		}
		b, _ = json.Marshal(rows[0])
		m = nil
		if err := json.Unmarshal(b, &m); err != nil || m["metric"] != "extents_per_file" || len(m) != 5 {
			t.Fatalf("json %s: %v", b, err)
		}
		sizes := []int64{1, 4096, 5000, 70000, 0, 1 << 20, 123}
		rows, err = SmallFiles(Options{Legacy: legacy, Size: 1 << 30}, sizes)
		if err != nil {
			t.Fatal(err)
		}
		if rows[0].Metric != "groups_touched" || rows[0].Value < 1 || rows[2].Value != 1+1+2+18+256+1 {
			t.Fatalf("smallfiles rows %+v", rows)
		}
	}
	_ = time.Second
}
