package bus

import "strings"

// MetaRedriveJobs is the header `tribunal redrive` (client.Redrive) sets on the first
// render request of an attempt: the jobs the attempt sends again, comma-separated, in
// the order it sends them. The aggregator learns them from the batch header, written
// before that request; the audit, which reads the stream, needs them at that request
// too (the attempt is pending on all of them from its start) and would otherwise learn
// the last of them only at the attempt's last request. It is checked, never trusted:
// the audit reports a list that is not the jobs the attempt's requests send again.
const MetaRedriveJobs = "tribunal_redrive_jobs"

// MaxRedriveJobsHeader bounds the header: a redrive of more jobs than it holds goes
// without it (the audit then reads the stream twice).
const MaxRedriveJobsHeader = 64 << 10

// FormatRedriveJobs writes a MetaRedriveJobs header; "" when the jobs do not fit in it.
func FormatRedriveJobs(jobs []string) string {
	h := strings.Join(jobs, ",")
	if len(h) > MaxRedriveJobsHeader {
		return ""
	}
	return h
}

// ParseRedriveJobs reads a MetaRedriveJobs header; nil for none.
func ParseRedriveJobs(h string) []string {
	if h == "" {
		return nil
	}
	return strings.Split(h, ",")
}
