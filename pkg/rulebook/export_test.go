package rulebook

// Spilled counts the job records m keeps in its spill file.
func Spilled(m *Memory) int { return len(m.spilled) }
