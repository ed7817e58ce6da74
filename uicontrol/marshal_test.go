package uicontrol

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// referenceEnvelope is how the envelope was encoded before MarshalJSON
// wrote it directly: encoding/json over a struct with the wire names.
// appendJSON must produce exactly these bytes.
type referenceEnvelope struct {
	UIAP          string                     `json:"uiap"`
	Kind          Kind                       `json:"kind"`
	Type          string                     `json:"type"`
	ID            string                     `json:"id"`
	SessionID     string                     `json:"sessionId,omitempty"`
	CorrelationID string                     `json:"correlationId,omitempty"`
	TS            string                     `json:"ts"`
	Source        EndpointRef                `json:"source"`
	Target        *EndpointRef               `json:"target,omitempty"`
	Seq           int64                      `json:"seq,omitempty"`
	Requires      []string                   `json:"requires,omitempty"`
	Payload       json.RawMessage            `json:"payload"`
	Ext           map[string]json.RawMessage `json:"ext,omitempty"`
}

func referenceMarshal(e *Envelope) ([]byte, error) {
	p := e.Payload
	if isNull(p) {
		p = json.RawMessage("{}")
	}
	return json.Marshal(referenceEnvelope{
		UIAP: e.UIAP, Kind: e.Kind, Type: e.Type, ID: e.ID, SessionID: e.SessionID,
		CorrelationID: e.CorrelationID, TS: e.TS.UTC().Format(timeFormat), Source: e.Source,
		Target: e.Target, Seq: e.Seq, Requires: e.Requires, Payload: p, Ext: e.Ext,
	})
}

// checkMarshal compares MarshalJSON with the encoding/json reference:
// the same bytes, or both refuse.
func checkMarshal(t *testing.T, e *Envelope) {
	t.Helper()
	got, gerr := e.MarshalJSON()
	want, werr := referenceMarshal(e)
	if (gerr != nil) != (werr != nil) {
		t.Fatalf("MarshalJSON error %v, encoding/json error %v", gerr, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("MarshalJSON differs from encoding/json:\n got %s\nwant %s", got, want)
	}
}

func TestMarshalJSONMatchesEncodingJSON(t *testing.T) {
	ts := time.Date(2026, 11, 22, 15, 4, 5, 123456789, time.FixedZone("X", 3600))
	full := &Envelope{UIAP: "0.1", Kind: KindResponse, Type: "x.t", ID: "m-1", SessionID: "s-1", CorrelationID: "c-1",
		TS: ts, Source: EndpointRef{Role: "app", ID: "shop", InstanceID: "i-1"}, Target: &EndpointRef{Role: "agent", ID: "a"},
		Seq: 42, Requires: []string{"uiap.action@0.1", "x"}, Payload: json.RawMessage(` { "a" : [1, 2, {"b": "<&>"}] } `),
		Ext: map[string]json.RawMessage{"z.ext": json.RawMessage(`{"k": 1}`), "a.ext": json.RawMessage(`"\u2028 x"`), "n.ext": nil}}
	for name, e := range map[string]*Envelope{
		"minimal":        {UIAP: "0.1", Kind: KindEvent, Type: "x.e", ID: "1", Source: EndpointRef{Role: "agent", ID: "a"}},
		"full":           full,
		"escapes":        {UIAP: "0.1", Kind: KindRequest, Type: "x.<t>&\"q\"\\", ID: "id\u2028\x01\t\xff", Source: EndpointRef{Role: "ä", ID: "😀"}, Payload: json.RawMessage(`{"s":"<\u2029>"}`)},
		"null payload":   {UIAP: "0.1", Kind: KindEvent, Type: "x", ID: "1", Payload: json.RawMessage("null")},
		"bad payload":    {UIAP: "0.1", Kind: KindEvent, Type: "x", ID: "1", Payload: json.RawMessage(`{"a":`)},
		"bad ext":        {UIAP: "0.1", Kind: KindEvent, Type: "x", ID: "1", Ext: map[string]json.RawMessage{"e": json.RawMessage(`{`)}},
		"empty requires": {UIAP: "0.1", Kind: KindEvent, Type: "x", ID: "1", Requires: []string{}},
		"negative seq":   {UIAP: "0.1", Kind: KindEvent, Type: "x", ID: "1", Seq: -3},
	} {
		t.Run(name, func(t *testing.T) { checkMarshal(t, e) })
	}
}

// FuzzMarshalJSON: for any envelope the decoder accepts, and for any
// payload and string fields, MarshalJSON writes what encoding/json
// writes.
func FuzzMarshalJSON(f *testing.F) {
	f.Add("0.1", "x.t", "id-1", "app", `{"a":1}`, `{"k":"<v>"}`, int64(3))
	f.Add("0.1", "\u2028<&>", "\xff\x00", "", ` [ ] `, `nul`, int64(-1))
	f.Fuzz(func(t *testing.T, version, typ, id, role, payload, ext string, seq int64) {
		e := &Envelope{UIAP: version, Kind: KindRequest, Type: typ, ID: id, SessionID: id + typ, TS: time.Unix(seq, seq),
			Source: EndpointRef{Role: role, ID: typ, InstanceID: version}, Seq: seq, Requires: []string{typ, id},
			Payload: json.RawMessage(payload), Ext: map[string]json.RawMessage{typ: json.RawMessage(ext), id: json.RawMessage(payload)}}
		checkMarshal(t, e)
		if d, err := decodeEnvelope([]byte(payload), DefaultMaxMessageSize); err == nil {
			checkMarshal(t, d)
		}
	})
}
