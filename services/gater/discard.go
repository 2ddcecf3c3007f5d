package gater

import "io"

// discard reads rc to its end (verifying its digest on the way) and closes it.
func discard(rc io.ReadCloser) (int64, error) {
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}
