package rulebook

// Spilled counts the job records m keeps in its spill file.
func Spilled(m *Memory) int { return m.spilled }

// CollideKeys makes every key m indexes share one tag (jobIndex), as if their hashes
// collided: every lookup must then tell the keys apart by the records.
func CollideKeys(m *Memory) {
	m.init()
	m.index.tagOf = func(string) uint32 { return 0x5eed }
}
