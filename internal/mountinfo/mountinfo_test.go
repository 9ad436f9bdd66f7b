package mountinfo

import (
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/devnum"
)

func TestParse(t *testing.T) {
	table := `36 35 98:0 /mnt1 /mnt/a\040b rw,noatime master:1 - ext3 /dev/root rw,errors=continue
37 35 7:3 / /x ro,relatime - ext4 /dev/loop3 ro
garbage
38 35 bad / /y rw - tmpfs tmpfs rw
`
	ms, err := Parse(strings.NewReader(table))
	if err != nil || len(ms) != 2 {
		t.Fatalf("Parse: %+v, %v", ms, err)
	}
	want := []Mount{
		{Dev: devnum.Mkdev(98, 0), Point: "/mnt/a b", FSType: "ext3", Source: "/dev/root"},
		{Dev: devnum.Mkdev(7, 3), Point: "/x", ReadOnly: true, FSType: "ext4", Source: "/dev/loop3"},
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, ms[i], want[i])
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`/mnt/a\040b`: "/mnt/a b", `/x\134y`: `/x\y`, `/plain`: "/plain", `/end\04`: `/end\04`, `\040`: " "} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
