package messaging

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// subprotocol is the WebSocket subprotocol of UAMP (DESIGN §5).
const subprotocol = "uamp.v1"

// frameHeaderSize is the size of a record's length prefix.
const frameHeaderSize = 4

// appendFrame appends one record to dst: the 4-byte big-endian length of
// b, then b.
func appendFrame(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// The causes of frameReader's refusals: a record over the limit
// (answered with 4.13) and every other malformation (4.00).
var (
	errFraming        = errors.New("messaging: malformed WebSocket message")
	errRecordTooLarge = errors.New("messaging: WebSocket record too large")
)

// frameReader reads the records of one WebSocket message: one or more,
// each a 4-byte big-endian length and that many bytes, which tile the
// message exactly. A record is at least 2 bytes (the shortest JSON
// object) and at most max bytes.
type frameReader struct {
	msg   []byte
	max   int
	count int
}

// next returns the next record, or (nil, nil) at the end of the message.
// A message without records, a record shorter than 2 or longer than max
// bytes, and a length that overruns the message are errors. The record
// aliases the message.
func (r *frameReader) next() ([]byte, error) {
	if len(r.msg) == 0 {
		if r.count == 0 {
			return nil, fmt.Errorf("%w: no record", errFraming)
		}
		return nil, nil
	}
	if len(r.msg) < frameHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes after the last record", errFraming, len(r.msg))
	}
	n := binary.BigEndian.Uint32(r.msg)
	switch {
	case n < 2:
		return nil, fmt.Errorf("%w: record of %d bytes", errFraming, n)
	case uint64(n) > uint64(r.max):
		return nil, fmt.Errorf("%w: record of %d bytes, more than %d", errRecordTooLarge, n, r.max)
	case uint64(n) > uint64(len(r.msg)-frameHeaderSize):
		return nil, fmt.Errorf("%w: record of %d bytes in %d", errFraming, n, len(r.msg)-frameHeaderSize)
	}
	rec := r.msg[frameHeaderSize : frameHeaderSize+int(n)]
	r.msg = r.msg[frameHeaderSize+int(n):]
	r.count++
	return rec, nil
}
