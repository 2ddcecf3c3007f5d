package judge

import (
	"encoding/json"
	"strings"
	"testing"
)

// Stored call records keep json.MarshalIndent's bytes however the encoder is reused.
func TestCallRecordEncodeIsMarshalIndent(t *testing.T) {
	t.Parallel()
	records := []*CallRecord{
		{Version: CallRecordVersion},
		{Version: CallRecordVersion, Exchanges: []Exchange{{}}},
	}
	big := CallRecord{Version: CallRecordVersion, Exchanges: []Exchange{{Kind: "ab", Model: "m",
		Messages: []RecordedMessage{{Role: "user"}}, Response: "<b>a & b</b> \u2028 \"" + strings.Repeat("x", 300<<10)}}}
	records = append(records, &big, records[1])
	for i, c := range records {
		want, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("record %d: Encode differs from MarshalIndent:\n got %.200s\nwant %.200s", i, got, want)
		}
	}
}
