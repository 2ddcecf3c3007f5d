package records

// SetScanPlaced sets the hook told where each scan's consumer reads and where the
// stream's leader is and whether the consumer's member is current, until the test's cleanup.
func SetScanPlaced(cleanup func(func()), fn func(consumer, leader string, current bool)) {
	scanPlaced = fn
	cleanup(func() { scanPlaced = nil })
}
