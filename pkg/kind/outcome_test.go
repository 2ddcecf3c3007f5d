package kind

import "testing"

func TestExitCode(t *testing.T) {
	t.Parallel()
	const (
		c = OutcomeClean
		f = OutcomeFinding
		b = OutcomeBlocked
		s = OutcomeSchemaViolation
	)
	tests := []struct {
		name string
		in   []Outcome
		want int
	}{
		{"empty batch is a usage error", nil, ExitUsage},
		{"all clean", []Outcome{c, c, c}, ExitClean},
		{"one clean", []Outcome{c}, ExitClean},
		{"one finding", []Outcome{c, f, c}, ExitFindings},
		{"all findings", []Outcome{f, f}, ExitFindings},
		{"all blocked", []Outcome{b, b}, ExitBlocked},
		{"one blocked", []Outcome{b}, ExitBlocked},
		{"partially blocked, rest clean", []Outcome{c, b, c}, ExitFindings},
		{"partially blocked, rest findings", []Outcome{f, b}, ExitFindings},
		{"schema violation alone", []Outcome{s}, ExitSchemaViolation},
		{"schema violation beats findings", []Outcome{f, s, c}, ExitSchemaViolation},
		{"schema violation beats blocked", []Outcome{b, s, b}, ExitSchemaViolation},
		{"schema violation last", []Outcome{c, c, s}, ExitSchemaViolation},
		{"unknown outcome", []Outcome{c, "weird"}, ExitSchemaViolation},
	}
	for _, tc := range tests {
		if got := ExitCode(tc.in); got != tc.want {
			t.Errorf("%s: ExitCode(%v) = %d, want %d", tc.name, tc.in, got, tc.want)
		}
	}
}
