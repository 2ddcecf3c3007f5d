package critic

import (
	"testing"
)

// TestMedianScores: the median of each axis; between two whole scores (an even number of
// trials), the stricter one.
func TestMedianScores(t *testing.T) {
	if c, s, sc := MedianScores([][3]int{{8, 2, 8}, {5, 2, 8}, {9, 1, 9}}); c != 8 || s != 2 || sc != 8 {
		t.Errorf("odd: %d %d %d", c, s, sc)
	}
	if c, s, sc := MedianScores([][3]int{{8, 2, 7}, {7, 3, 8}}); c != 7 || s != 3 || sc != 7 {
		t.Errorf("even: %d %d %d, want the stricter 7, 3, 7", c, s, sc)
	}
}
