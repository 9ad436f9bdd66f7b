package super

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestErrorRecordRoundTrip(t *testing.T) {
	sb := goodSuper()
	first := ErrorRecord{Time: time.Unix(1<<32+77, 0), Ino: 12, Block: 1<<40 + 3,
		Func: "ext4go_remove_entry_with_a_long_name_past_32", Line: 4242, Code: ErrCodeEFSCORRUPTED}
	sb.RecordError(first)
	last := ErrorRecord{Time: time.Unix(1700000000, 0), Ino: 99, Block: 5, Func: "truncate", Line: 7, Code: ErrCodeEFSBADCRC}
	sb.RecordError(last)
	// A second error changes only the last record and the count.
	if sb.State&StateError == 0 || sb.ErrorCount != 2 {
		t.Fatalf("state %#x count %d", sb.State, sb.ErrorCount)
	}
	got, err := Decode(sb.Encode())
	if err != nil {
		t.Fatal(err)
	}
	first.Func = first.Func[:32] // s_first_error_func holds 32 bytes, no NUL needed
	if g := got.FirstError(); g != first {
		t.Errorf("first error %+v, want %+v", g, first)
	}
	if g := got.LastError(); g != last {
		t.Errorf("last error %+v, want %+v", g, last)
	}
	// Offsets: the high time bytes and the codes sit at 0x278..0x27B.
	raw := sb.Encode()
	if raw[0x278] != 1 || raw[0x279] != 0 || raw[0x27A] != ErrCodeEFSCORRUPTED || raw[0x27B] != ErrCodeEFSBADCRC {
		t.Errorf("bytes 0x278..0x27B = % x", raw[0x278:0x27C])
	}
	// Code 0 is EFSCORRUPTED, as the kernel defaults it.
	sb2 := goodSuper()
	sb2.RecordError(ErrorRecord{Time: time.Unix(5, 0), Func: "x"})
	if sb2.FirstErrorErrcode != ErrCodeEFSCORRUPTED || sb2.LastErrorErrcode != ErrCodeEFSCORRUPTED {
		t.Errorf("codes %d %d", sb2.FirstErrorErrcode, sb2.LastErrorErrcode)
	}
	for errno, code := range map[int]uint8{0: ErrCodeEFSCORRUPTED, 117: ErrCodeEFSCORRUPTED, 74: ErrCodeEFSBADCRC, 5: ErrCodeEIO, 28: ErrCodeENOSPC, 9999: ErrCodeUnknown} {
		if c := ErrnoToCode(errno); c != code {
			t.Errorf("ErrnoToCode(%d) = %d, want %d", errno, c, code)
		}
	}
	if ErrCodeName(ErrCodeEFSCORRUPTED) != "EFSCORRUPTED" || ErrCodeName(200) != "200" {
		t.Errorf("names %q %q", ErrCodeName(ErrCodeEFSCORRUPTED), ErrCodeName(200))
	}
}

// dumpHeaderUTC is dumpe2fs -h of image with times in UTC.
func dumpHeaderUTC(t *testing.T, image string) map[string]string {
	t.Helper()
	needTool(t, "dumpe2fs")
	cmd := exec.Command("dumpe2fs", "-h", image)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dumpe2fs -h: %v", err)
	}
	return dumpHeader(string(out))
}

func ansiUTC(t time.Time) string { return t.UTC().Format(time.ANSIC) }

// TestErrorRecordDumpe2fs writes the error fields with this package and
// reads them with dumpe2fs -h (e2fsprogs: list_super2), which checks the
// offsets against e2fsprogs' struct ext2_super_block.
func TestErrorRecordDumpe2fs(t *testing.T) {
	image := mkfs(t, 8<<20, "-t", "ext4", "-b", "1024")
	f, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sb, err := Decode(readAt(t, f, Offset, Size))
	if err != nil {
		t.Fatal(err)
	}
	first := ErrorRecord{Time: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Ino: 12, Block: 345,
		Func: "ext4_lookup", Line: 1234, Code: ErrCodeEFSCORRUPTED}
	last := ErrorRecord{Time: time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC), Ino: 77, Block: 88,
		Func: "ext4_mb_generate_buddy", Line: 99, Code: ErrCodeEFSBADCRC}
	sb.RecordError(first)
	sb.RecordError(last)
	if _, err := f.WriteAt(sb.Encode(), Offset); err != nil {
		t.Fatal(err)
	}
	h := dumpHeaderUTC(t, image)
	want := map[string]string{
		"Filesystem state":     "clean with errors",
		"FS Error count":       "2",
		"First error time":     ansiUTC(first.Time),
		"First error function": "ext4_lookup",
		"First error line #":   "1234",
		"First error inode #":  "12",
		"First error block #":  "345",
		"First error err":      "EFSCORRUPTED",
		"Last error time":      ansiUTC(last.Time),
		"Last error function":  "ext4_mb_generate_buddy",
		"Last error line #":    "99",
		"Last error inode #":   "77",
		"Last error block #":   "88",
		"Last error err":       "EFSBADCRC",
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("dumpe2fs %q: %q, want %q", k, h[k], v)
		}
	}
}

// TestErrorRecordFromDebugfs reads the error fields that debugfs's
// set_super_value wrote (e2fsprogs' own idea of their offsets).
func TestErrorRecordFromDebugfs(t *testing.T) {
	image := mkfs(t, 8<<20, "-t", "ext4", "-b", "1024")
	needTool(t, "debugfs")
	var reqs []string
	for _, r := range []string{
		"state 3", "error_count 5",
		"first_error_time 20240102030405", "first_error_ino 12", "first_error_block 345",
		"first_error_func ext4_lookup", "first_error_line 1234",
		"last_error_time 20250607080910", "last_error_ino 77", "last_error_block 88",
		"last_error_func ext4_mb_generate_buddy", "last_error_line 99",
	} {
		reqs = append(reqs, "ssv "+r)
	}
	cmd := exec.Command("debugfs", "-w", "-f", "-", image)
	cmd.Stdin = strings.NewReader(strings.Join(reqs, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "invalid") {
		t.Fatalf("debugfs: %v\n%s", err, out)
	}
	f, err := os.Open(image)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sb, err := Decode(readAt(t, f, Offset, Size))
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != StateValid|StateError || sb.ErrorCount != 5 {
		t.Errorf("state %#x, error count %d", sb.State, sb.ErrorCount)
	}
	// debugfs sets no error codes (no ssv field for them).
	wantFirst := ErrorRecord{Time: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Ino: 12, Block: 345, Func: "ext4_lookup", Line: 1234}
	wantLast := ErrorRecord{Time: time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC), Ino: 77, Block: 88, Func: "ext4_mb_generate_buddy", Line: 99}
	if g := sb.FirstError(); !g.Time.Equal(wantFirst.Time) || g.Ino != wantFirst.Ino || g.Block != wantFirst.Block || g.Func != wantFirst.Func || g.Line != wantFirst.Line {
		t.Errorf("first error %+v, want %+v", g, wantFirst)
	}
	if g := sb.LastError(); !g.Time.Equal(wantLast.Time) || g.Ino != wantLast.Ino || g.Block != wantLast.Block || g.Func != wantLast.Func || g.Line != wantLast.Line {
		t.Errorf("last error %+v, want %+v", g, wantLast)
	}
	// A further error keeps the first record and counts on.
	sb.RecordError(ErrorRecord{Time: time.Unix(1800000000, 0), Func: "again"})
	if sb.FirstError().Func != "ext4_lookup" || sb.LastError().Func != "again" || sb.ErrorCount != 6 {
		t.Errorf("after another error: first %q last %q count %d", sb.FirstError().Func, sb.LastError().Func, sb.ErrorCount)
	}
}
