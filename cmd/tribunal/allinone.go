package main

// memoryLimitFor is the all-in-one mode's soft memory limit for a batch of n ACs: 8 KiB
// per AC, at least 256 MiB and at most defaultMemoryLimit. The runtime collects
// harder as the process nears its limit, so a 10,000-AC batch, whose live heap stays near
// 150 MiB, peaks under 300 MiB instead of wherever the collector's pacing takes it
// (330-390 MiB measured), while a 100,000-AC batch keeps the whole default: with less
// (600 MiB), its collector ran most of the time. A larger batch's live heap can pass
// it: the limit then rises with the live heap (memlimit.Follow), as at 1,000,000 ACs.
func memoryLimitFor(n int) int64 {
	return min(defaultMemoryLimit, max(256<<20, int64(n)*8<<10))
}
