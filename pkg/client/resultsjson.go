package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes r as indented JSON, byte for byte what a json.Encoder with a two-space
// indent writes (the form of every --json output), but a row at a time: an encoder
// given the whole of a 1,000,000-AC batch's results builds its encoding in one buffer
// and indents it into a second, about three times the output held at once, where this
// holds one row's.
func (r *Results) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if len(r.Rows) == 0 {
		enc := json.NewEncoder(bw)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("encode the results of %s/%s: %w", r.Tenant, r.BatchID, err)
		}
		return bw.Flush()
	}
	// Everything but the rows, encoded as the whole would be: "results" is the last
	// field, so its empty list closes the head, and the rows go in its place.
	head := *r
	head.Rows = []Row{}
	data, err := json.MarshalIndent(&head, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the results of %s/%s: %w", r.Tenant, r.BatchID, err)
	}
	const tail = "\"results\": []\n}"
	if !bytes.HasSuffix(data, []byte(tail)) {
		return fmt.Errorf("encode the results of %s/%s: the rows are not the last field", r.Tenant, r.BatchID)
	}
	bw.Write(data[:len(data)-len("[]\n}")])
	bw.WriteString("[\n    ")
	var row bytes.Buffer
	enc := json.NewEncoder(&row)
	enc.SetIndent("    ", "  ")
	for i := range r.Rows {
		row.Reset()
		if err := enc.Encode(&r.Rows[i]); err != nil {
			return fmt.Errorf("encode result %d (%s) of %s/%s: %w", i, r.Rows[i].ACID, r.Tenant, r.BatchID, err)
		}
		if i > 0 {
			bw.WriteString(",\n    ")
		}
		bw.Write(bytes.TrimSuffix(row.Bytes(), []byte("\n")))
	}
	bw.WriteString("\n  ]\n}\n")
	return bw.Flush()
}
