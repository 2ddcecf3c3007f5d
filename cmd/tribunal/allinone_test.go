package main

import "testing"

func TestMemoryLimitFor(t *testing.T) {
	for _, c := range []struct {
		acs  int
		want int64
	}{{1, 256 << 20}, {10000, 256 << 20}, {50000, 50000 * 8 << 10}, {100000, defaultMemoryLimit}, {1000000, defaultMemoryLimit}} {
		if got := memoryLimitFor(c.acs); got != c.want {
			t.Errorf("memoryLimitFor(%d) = %d MiB, want %d MiB", c.acs, got>>20, c.want>>20)
		}
	}
}
