package journal

import "github.com/agentry-dev/agentry/govern"

// The two paths of the codec, for the differential tests.
var (
	DecodeFast       = decodeFast
	DecodeRecordJSON = decodeRecordJSON
	AppendRecordFast = appendRecordFast
	AppendRecordJSON = appendRecordJSON
)

// DecodeVerify is Open's decoding of a line it verifies: the record (its
// strings views of line), its hash, and why it is not a record or its
// hash cannot be computed.
func DecodeVerify(line []byte) (rec govern.Record, hash string, decodeErr, hashErr error) {
	var rr readRecord
	rr.decodeVerify(line)
	return rr.rec, rr.hash, rr.err, rr.hashErr
}

// DecodeBorrowed is decodeBorrowed.
func DecodeBorrowed(line []byte) (govern.Record, bool) {
	var r govern.Record
	ok := decodeBorrowed(line, &r)
	return r, ok
}
