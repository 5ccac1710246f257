package cli

import "testing"

func TestParseLimit(t *testing.T) {
	for in, want := range map[string]int64{
		"max\n":                 0,
		"536870912\n":           536870912,
		"9223372036854771712\n": 0, // cgroup v1's "unlimited"
		"":                      0,
		"-1":                    0,
	} {
		if got := parseLimit(in); got != want {
			t.Errorf("parseLimit(%q) = %d, want %d", in, got, want)
		}
	}
}
