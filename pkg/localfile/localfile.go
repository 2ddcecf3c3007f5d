// Package localfile reads the files a batch names on the machine that submits it:
// regular files only. Opening a FIFO for reading blocks until something writes to it,
// forever if nothing does, and no context or signal can end a goroutine blocked in that
// open; reading a device can go on without end. So the path is checked before it is
// opened, opened without blocking (O_NONBLOCK) in case it was swapped for a FIFO in
// between, and checked again through the open descriptor; ReadFile stops when its
// context ends (an upload through blob.Store.Put does already).
package localfile

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// NotRegularError reports a path that is not a regular file.
type NotRegularError struct {
	Path string
	// Kind says what it is instead: "a directory", "a named pipe (FIFO)", ...
	Kind string
}

// Error implements error.
func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, e.Kind)
}

// Kind words a file mode that is not a regular file.
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "not a regular file"
}

// Open opens path for reading when it is a regular file (symbolic links are followed:
// where a link may lead is the caller's to check), and returns its information. Any
// other kind of file is a *NotRegularError, returned without blocking.
func Open(path string) (*os.File, fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, &NotRegularError{Path: path, Kind: Kind(st.Mode())}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	if st, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotRegularError{Path: path, Kind: Kind(st.Mode())}
	}
	return f, st, nil
}

// ReadFile reads a regular file whole (see Open), stopping with ctx's error when ctx
// ends first.
func ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, st, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
	chunk := make([]byte, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, err := f.Read(chunk)
		buf.Write(chunk[:n])
		if err == io.EOF {
			return buf.Bytes(), nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
}
