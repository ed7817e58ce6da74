// Package journalfixture holds what the tests of the governance journals
// share: records to append, the samples of Data every journal must keep,
// and the comparison of records read back.
package journalfixture

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Record returns a record to append: request reqID, a fixed trace, the
// current time to the millisecond (what the wire form keeps), and data
// as its Data ("" for none).
func Record(kind govern.RecordKind, reqID, data string) *govern.Record {
	r := &govern.Record{
		Timestamp: govern.Time{Time: time.Now().UTC().Truncate(time.Millisecond)},
		Kind:      kind, RequestID: reqID, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		Actor: govern.Actor{ID: "agent:journaltest", Kind: govern.ActorAgent}, Outcome: govern.Pending,
	}
	if data != "" {
		r.Data = json.RawMessage(data)
	}
	return r
}

// compactJSON is the comparison of Data: equal once compacted.
var compactJSON = cmp.Comparer(func(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
})

// equateEmpty equates nil and empty slices other than Data (which
// compactJSON compares).
var equateEmpty = cmp.FilterPath(func(p cmp.Path) bool {
	return p.Last().Type() != reflect.TypeFor[json.RawMessage]()
}, cmpopts.EquateEmpty())

var sameTime = cmp.Comparer(func(a, b govern.Time) bool { return a.Equal(b.Time) })

// Diff returns the difference between want and got records (-want +got):
// Data compared once compacted, times as instants.
func Diff(want, got []govern.Record) string {
	return cmp.Diff(want, got, compactJSON, sameTime, equateEmpty)
}

// DataSamples are Data values every journal must keep as they are (once
// compacted): nested structures, escapes, HTML-special characters, line
// and paragraph separators, non-ASCII text, numbers in various forms.
var DataSamples = []string{
	`{}`,
	`[]`,
	`null`,
	`"a string"`,
	`12345678901234567890`,
	`{"n": 1.0, "e": 1e3, "neg": -0.5, "big": 9007199254740993}`,
	`{ "nested" : { "list" : [ 1, "two", true, null, { "x" : [] } ] } }`,
	`{"html":"<b>&amp;</b> <script>","quote":"\"","bs":"\\","ctl":"\n\t\r\u0001"}`,
	`{"ls":"a\u2028b\u2029c","raw":"a` + "\u2028" + `b"}`,
	`{"unicode":"ß 東京 🚀","escaped":"\u00df\ud83d\ude80"}`,
	`{"k":"` + strings.Repeat("x", 100_000) + `"}`,
	"{\n  \"indented\": [\n    1,\n    2\n  ]\n}",
}
