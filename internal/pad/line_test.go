package pad

import "testing"

// TestApart checks Apart against every 8-byte aligned start of an array
// within a line: the hot ranges of two neighbours share a line exactly
// when Apart says they may.
func TestApart(t *testing.T) {
	for hot := uintptr(8); hot <= 64; hot += 8 {
		for stride := hot; stride <= 256; stride += 8 {
			shared := false
			for base := uintptr(0); base < Line; base += 8 {
				lastLine := (base + hot - 1) / Line // of element 0's hot bytes
				firstLine := (base + stride) / Line // of element 1's
				if lastLine >= firstLine {
					shared = true
				}
			}
			if Apart(stride, hot) == shared {
				t.Errorf("Apart(%d, %d) = %v, but some start shares a line: %v", stride, hot, Apart(stride, hot), shared)
			}
		}
	}
}
