package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentry-dev/agentry/govern"
)

// MaxRecordSize bounds one record line, its newline included. A longer
// line is not a record (DecodeRecord), and Append refuses to write one.
const MaxRecordSize = 16 << 20

// The members of a record line: those encoding/json always writes for a
// govern.Record (required) and those it omits when empty.
var (
	recordRequired = []string{"seq", "prev", "hash", "timestamp", "kind", "request_id", "trace_id", "actor", "outcome"}
	recordOptional = []string{"parent_trace_id", "span_id", "node", "epoch", "from", "to", "tool", "call_id", "reasons", "unique", "data"}
	actorRequired  = []string{"id", "kind"}
)

var recordMembers = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range recordRequired {
		m[k] = true
	}
	for _, k := range recordOptional {
		m[k] = false
	}
	return m
}()

var actorMembers = map[string]bool{"id": true, "kind": true}

// AppendRecord appends r's record line to dst: the encoding/json form of
// the record without HTML escaping (so that Data keeps its bytes, only
// compacted) and a '\n'. It is the line the file journal writes and
// DecodeRecord reads; the audit JSONL sink writes the same lines.
func AppendRecord(dst []byte, r *govern.Record) ([]byte, error) {
	if b, ok := appendRecordFast(dst, r); ok {
		if line := b[len(dst):]; len(line) <= MaxRecordSize {
			return b, nil
		}
		return dst, fmt.Errorf("journal: record %d is %d bytes, more than MaxRecordSize", r.Seq, len(b)-len(dst))
	}
	return appendRecordJSON(dst, r)
}

// appendRecordJSON is AppendRecord by encoding/json: the reference for
// appendRecordFast, and the path of what it does not take.
func appendRecordJSON(dst []byte, r *govern.Record) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil { // Encode adds the '\n'
		return dst, fmt.Errorf("journal: encode record %d: %w", r.Seq, err)
	}
	line := buf.Bytes()[len(dst):]
	if len(line) > MaxRecordSize {
		return dst, fmt.Errorf("journal: record %d is %d bytes, more than MaxRecordSize", r.Seq, len(line))
	}
	if bytes.IndexByte(line[:len(line)-1], '\n') >= 0 { // cannot happen: JSON escapes newlines
		return dst, fmt.Errorf("journal: record %d encodes with a newline", r.Seq)
	}
	return buf.Bytes(), nil
}

// DecodeRecord decodes one record line (its '\n' optional), strictly: one
// JSON object holding exactly the members of a govern.Record, spelled as
// encoding/json writes them (no other case), each at most once, those it
// always writes present, nothing after the object, at most MaxRecordSize
// bytes. The record's hash is not checked here (govern.ChainVerifier
// does).
func DecodeRecord(line []byte) (govern.Record, error) {
	if r, ok := decodeFast(line); ok {
		return r, nil
	}
	return decodeRecordJSON(line)
}

// decodeRecordJSON is DecodeRecord by encoding/json: the reference for
// decodeFast, and the path of what it does not take (and the error).
func decodeRecordJSON(line []byte) (govern.Record, error) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if len(line) >= MaxRecordSize {
		return govern.Record{}, fmt.Errorf("record line longer than %d bytes", MaxRecordSize)
	}
	if err := checkMembers(line); err != nil {
		return govern.Record{}, err
	}
	var r govern.Record
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return govern.Record{}, err
	}
	if _, err := d.Token(); err != io.EOF {
		return govern.Record{}, errors.New("data after the record")
	}
	return r, nil
}

// checkMembers checks the members of a record line's object, and of its
// actor: known, exactly spelled, not repeated, the required ones present.
// encoding/json alone would accept other cases and let a repeated member
// hide an earlier one.
func checkMembers(line []byte) error {
	d := json.NewDecoder(bytes.NewReader(line))
	return object(d, recordMembers, recordRequired, "record", func(key string) error {
		if key == "actor" {
			return object(d, actorMembers, actorRequired, "actor", nil)
		}
		var skip json.RawMessage
		return d.Decode(&skip)
	})
}

// object reads one object's members from d; value reads each member's
// value (nil: skip it). A missing member is reported in required's order,
// so that the same line always gets the same error.
func object(d *json.Decoder, members map[string]bool, required []string, what string, value func(key string) error) error {
	tok, err := d.Token()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("%s is not a JSON object", what)
	}
	seen := make(map[string]bool, len(members))
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		key, _ := tok.(string)
		if _, ok := members[key]; !ok {
			return fmt.Errorf("%s has an unknown member %q", what, key)
		}
		if seen[key] {
			return fmt.Errorf("%s has member %q twice", what, key)
		}
		seen[key] = true
		if value != nil {
			err = value(key)
		} else {
			var skip json.RawMessage
			err = d.Decode(&skip)
		}
		if err != nil {
			return fmt.Errorf("%s member %q: %w", what, key, err)
		}
	}
	if _, err := d.Token(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, k := range required {
		if !seen[k] {
			return fmt.Errorf("%s lacks member %q", what, k)
		}
	}
	return nil
}
