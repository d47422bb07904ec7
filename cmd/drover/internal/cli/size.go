package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the suffixes parseSize accepts, longest first.
var sizeUnits = []struct {
	suffix string
	bytes  uint64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// parseSize reads a byte count: a number with an optional unit (B, KB, MB,
// GB, TB in powers of 1000; KiB, MiB, GiB, TiB in powers of 1024), such as
// "64MiB", "1.5GB" or "0".
func parseSize(s string) (uint64, error) {
	num, mult := strings.TrimSpace(s), uint64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.bytes
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a size (such as 64MiB, 1GB or 0)", s)
	}
	bytes := v * float64(mult)
	if bytes >= math.MaxUint64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return uint64(bytes), nil
}

// formatSize writes a byte count in the largest binary unit that divides
// it, as parseSize reads it back.
func formatSize(n uint64) string {
	for _, u := range []struct {
		suffix string
		bytes  uint64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.bytes && n%u.bytes == 0 {
			return strconv.FormatUint(n/u.bytes, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10) + "B"
}
