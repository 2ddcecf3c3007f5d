// Package dictzstd keeps many small, similar byte strings compactly: zstd with, as its
// dictionary, the first string it is asked to take one from. Job records of one batch,
// or the events the audit waits for, repeat their field names, tenant, batch, spec layout
// and boilerplate, so each compresses to a fifth or less of its size (a bench batch's
// job records: 2,675 bytes on average to 526), where zstd alone halves them.
//
// A Codec is not safe for concurrent use.
package dictzstd

import (
	"bytes"
	"errors"

	"github.com/klauspost/compress/zstd"
)

// Codec compresses values once it has a dictionary; before, it keeps them as they are.
// The first byte of an encoding says which form it has.
type Codec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
	buf []byte
}

const (
	plain byte = iota
	compressed
)

// dictID is the id of the dictionary in a compressed frame.
const dictID = 1

// window is the compression window: values are a few kilobytes, and a small window keeps
// the encoder's history small.
const window = 1 << 16

// Encode returns data's encoding, a new slice. When the codec has no dictionary yet and
// dictionary is true, data becomes it: pass true for a value typical of those to come.
func (c *Codec) Encode(data []byte, dictionary bool) []byte {
	if c.enc == nil && dictionary {
		dict := bytes.Clone(data)
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(window), zstd.WithEncoderDictRaw(dictID, dict))
		if err != nil {
			panic("dictzstd: zstd encoder: " + err.Error())
		}
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderDictRaw(dictID, dict))
		if err != nil {
			panic("dictzstd: zstd decoder: " + err.Error())
		}
		c.enc, c.dec = enc, dec
	}
	if c.enc == nil {
		return append([]byte{plain}, data...)
	}
	c.buf = c.enc.EncodeAll(data, append(c.buf[:0], compressed))
	return bytes.Clone(c.buf)
}

// Decode returns the value enc encodes; it may share enc's memory.
func (c *Codec) Decode(enc []byte) ([]byte, error) {
	switch {
	case len(enc) > 0 && enc[0] == plain:
		return enc[1:], nil
	case len(enc) > 0 && enc[0] == compressed && c.dec != nil:
		return c.dec.DecodeAll(enc[1:], nil)
	}
	return nil, errors.New("dictzstd: not an encoding of this codec")
}
