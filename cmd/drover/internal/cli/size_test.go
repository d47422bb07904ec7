package cli

import "testing"

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "4096", want: 4096},
		{in: "512B", want: 512},
		{in: "64MiB", want: 64 << 20},
		{in: "64 MiB", want: 64 << 20},
		{in: "1.5GiB", want: 3 << 29},
		{in: "2KB", want: 2000},
		{in: "1GB", want: 1e9},
		{in: "1TiB", want: 1 << 40},
		{in: "", bad: true},
		{in: "MiB", bad: true},
		{in: "-1MiB", bad: true},
		{in: "64mb", bad: true},
		{in: "NaN", bad: true},
		{in: "1e30TiB", bad: true},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		switch {
		case tt.bad && err == nil:
			t.Errorf("parseSize(%q) = %d, want an error", tt.in, got)
		case !tt.bad && (err != nil || got != tt.want):
			t.Errorf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatSizeRoundTrips(t *testing.T) {
	for _, n := range []uint64{0, 1, 1000, 1 << 10, 64 << 20, 3 << 29, 5 << 40, 1<<20 + 1} {
		got, err := parseSize(formatSize(n))
		if err != nil || got != n {
			t.Errorf("parseSize(formatSize(%d) = %q) = %d, %v", n, formatSize(n), got, err)
		}
	}
}
