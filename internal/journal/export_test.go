package journal

// The two paths of the codec, for the differential tests.
var (
	DecodeFast       = decodeFast
	DecodeRecordJSON = decodeRecordJSON
	AppendRecordFast = appendRecordFast
	AppendRecordJSON = appendRecordJSON
)
