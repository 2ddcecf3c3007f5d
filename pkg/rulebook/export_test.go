package rulebook

// Spilled counts the job records m keeps in its spill file.
func Spilled(m *Memory) int { return m.spilled }

// CollideKeys makes every key m indexes share one tag (jobIndex), as if their hashes
// collided: every lookup must then tell the keys apart by the records.
func CollideKeys(m *Memory) {
	m.init()
	m.index.tagOf = func(string) uint32 { return 0x5eed }
}

// SetHeldBudget sets the bytes m's log of records in flight may hold (defaultHeldBudget
// otherwise); before m's first use.
func SetHeldBudget(m *Memory, n int) { m.budget = n }

// HeldLog is what m's log of records in flight holds (garbage included) and the
// capacity its segments took.
func HeldLog(m *Memory) (used, capacity int) { return m.log.bytes() }

// Evicted counts the records in flight m's log wrote out to its spill file.
func Evicted(m *Memory) int { return m.evicted }

// SpillBytes is the size of m's spill file, superseded versions included.
func SpillBytes(m *Memory) int64 {
	if m.spill == nil {
		return 0
	}
	return m.spill.end
}
