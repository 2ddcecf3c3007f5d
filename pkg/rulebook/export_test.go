package rulebook

import "github.com/tribunal-dev/tribunal/pkg/stepset"

// Spilled counts the job records m keeps in its spill file.
func Spilled(m *Memory) int { return m.spilled }

// CollideKeys makes every key m indexes share one hash (jobIndex), as if their hashes
// collided: every lookup must then tell the keys apart by the records.
func CollideKeys(m *Memory) {
	m.init()
	m.index.hashOf = func(string) stepset.Key { return stepset.Key{0x5e, 0xed} }
}

// SetIndexBudgets sets the entries of m's key index in memory and the bytes of its
// places' words in memory (keySlots, atBudget otherwise); before m's first use.
func SetIndexBudgets(m *Memory, slots, words int) { m.IndexSlots, m.wordBudget = slots, words }

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
