package main

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Sizes, one syntax for every command, as coreutils (truncate -s,
// fallocate -l) and mke2fs take them: a decimal number and an optional
// unit, any case: K, M, G, T, P, E (powers of 1024, also written KiB,
// MiB...), KB, MB... (powers of 1000), s (512-byte sectors, mke2fs).

// unitExp maps a unit's first letter to its power.
const unitLetters = "KMGTPE"

// parseSizeIn reads a size in bytes. A bare number counts bare bytes
// each (1 for coreutils; mke2fs: 1024, or the -b block size). With
// fraction, a decimal fraction is taken (1.5G), rounded down to whole
// bytes. Zero is a size like any other; the caller says whether it may be.
func parseSizeIn(s string, bare int64, fraction bool) (int64, error) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || fraction && s[i] == '.') {
		i++
	}
	num, unit := s[:i], strings.ToUpper(s[i:])
	if num == "" || num == "." {
		return 0, fmt.Errorf("invalid size '%s'", s)
	}
	mult := big.NewInt(bare)
	switch {
	case unit == "":
	case unit == "S":
		mult = big.NewInt(512)
	case unit == "B":
		mult = big.NewInt(1)
	default:
		exp := strings.IndexByte(unitLetters, unit[0]) + 1
		base := int64(1024)
		switch {
		case exp == 0:
			return 0, fmt.Errorf("invalid suffix in size '%s'", s)
		case unit[1:] == "" || unit[1:] == "IB":
		case unit[1:] == "B":
			base = 1000
		default:
			return 0, fmt.Errorf("invalid suffix in size '%s'", s)
		}
		mult = new(big.Int).Exp(big.NewInt(base), big.NewInt(int64(exp)), nil)
	}
	// Exact arithmetic: 7E is 7<<60, and 8E is too large, where
	// float64 would round either way.
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid size '%s'", s)
	}
	r.Mul(r, new(big.Rat).SetInt(mult))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() || n.Int64() > math.MaxInt64 {
		return 0, fmt.Errorf("invalid size '%s': too large", s)
	}
	return n.Int64(), nil
}

// parseByteSize reads a byte count as coreutils and util-linux take it
// (truncate -s, fallocate -l/-o): whole numbers, bare ones in bytes.
func parseByteSize(s string) (int64, error) { return parseSizeIn(s, 1, false) }

// parseSize reads a size for the bench commands' options: bare numbers
// are bytes, fractions are taken, and zero is refused.
func parseSize(s string) (uint64, error) {
	n, err := parseSizeIn(s, 1, true)
	if err == nil && n == 0 {
		err = fmt.Errorf("size '%s' is zero", s)
	}
	return uint64(n), err
}
