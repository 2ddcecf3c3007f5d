package main

import (
	"strings"
	"testing"
)

// TestFlagTypoSuggestsTheFlag: a misspelt flag is a usage error naming the flag probably
// meant, as a misspelt command or YAML key is.
func TestFlagTypoSuggestsTheFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "examples/quickstart", "--jnuit", "x.xml"}, "unknown flag: --jnuit (did you mean --junit?)"},
		{[]string{"results", "--batc", "x"}, "unknown flag: --batc (did you mean --batch?)"},
		{[]string{"run", "examples/quickstart", "--log-levle=debug"}, "(did you mean --log-level?)"},
	} {
		_, stderr, code := run(t, repoRoot(t), tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "--help") {
			t.Errorf("%v: exit %d\n%s", tt.args, code, stderr)
		}
	}
	if _, stderr, code := run(t, repoRoot(t), "run", "examples/quickstart", "--zzzzzz"); code != 2 || strings.Contains(stderr, "did you mean") {
		t.Errorf("a flag like no other: exit %d\n%s", code, stderr)
	}
}

// TestUnknownVariableWarned: a TRIBUNAL_ variable no flag or setting reads is warned
// about, with the name it probably misspells; known ones, the NATS users' passwords and
// the test suites' settings are not.
func TestUnknownVariableWarned(t *testing.T) {
	_, stderr, code := runEnv(t, "", []string{"TRIBUNAL_CONCURENCY=3", "TRIBUNAL_NATS_JUDGE_PASSWORD=x", "TRIBUNAL_LOG_LEVEL=warn", "TRIBUNAL_S3_ACCESS_KEY=k"}, "version")
	if code != 0 || !strings.Contains(stderr, "tribunal: warning: TRIBUNAL_CONCURENCY is set but no tribunal flag or setting reads it (did you mean TRIBUNAL_CONCURRENCY?)") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, quiet := range []string{"TRIBUNAL_NATS_JUDGE_PASSWORD", "TRIBUNAL_LOG_LEVEL", "TRIBUNAL_S3_ACCESS_KEY"} {
		if strings.Contains(stderr, quiet) {
			t.Errorf("%s warned about:\n%s", quiet, stderr)
		}
	}
}
