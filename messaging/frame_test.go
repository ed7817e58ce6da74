package messaging

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzWSFrameReader: the record reader of WebSocket messages never
// panics; what it accepts is one or more records within the limit that
// tile the message, so writing them back gives the message.
func FuzzWSFrameReader(f *testing.F) {
	f.Add(appendFrame(nil, []byte(`{}`)), 16)
	f.Add(appendFrame(appendFrame(nil, []byte(`{"a":1}`)), []byte(`{"b":2}`)), 16)
	f.Add([]byte{0, 0, 0, 1, '{'}, 16)
	f.Add([]byte{0, 0, 0, 3, '{', '}'}, 16)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, '{', '}'}, 1<<20)
	f.Add([]byte{}, 16)
	f.Add(append(appendFrame(nil, []byte(`{}`)), 0, 0), 16)
	f.Fuzz(func(t *testing.T, msg []byte, max int) {
		if max < 2 {
			max = 2
		}
		r := frameReader{msg: msg, max: max}
		var out []byte
		for {
			rec, err := r.next()
			if err != nil {
				if !errors.Is(err, errFraming) && !errors.Is(err, errRecordTooLarge) {
					t.Fatalf("error %v is not a framing error", err)
				}
				return
			}
			if rec == nil {
				break
			}
			if len(rec) < 2 || len(rec) > max {
				t.Fatalf("record of %d bytes accepted (max %d)", len(rec), max)
			}
			out = appendFrame(out, rec)
		}
		if r.count == 0 || !bytes.Equal(out, msg) {
			t.Fatalf("records %q do not tile %q", out, msg)
		}
	})
}

func TestUAMP_7_WSFraming(t *testing.T) {
	msg := appendFrame(appendFrame(nil, []byte(`{"a":1}`)), []byte(`{}`))
	r := frameReader{msg: msg, max: 100}
	var got []string
	for {
		rec, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if rec == nil {
			break
		}
		got = append(got, string(rec))
	}
	if len(got) != 2 || got[0] != `{"a":1}` || got[1] != `{}` {
		t.Fatalf("records %q", got)
	}
	for name, c := range map[string]struct {
		msg  []byte
		want error
	}{
		"empty":     {nil, errFraming},
		"short":     {[]byte{0, 0, 0}, errFraming},
		"overrun":   {[]byte{0, 0, 0, 9, '{', '}'}, errFraming},
		"trailing":  {append(appendFrame(nil, []byte(`{}`)), 0), errFraming},
		"too large": {appendFrame(nil, bytes.Repeat([]byte{'x'}, 101)), errRecordTooLarge},
		"tiny":      {[]byte{0, 0, 0, 1, '{'}, errFraming},
	} {
		r := frameReader{msg: c.msg, max: 100}
		var err error
		for err == nil {
			var rec []byte
			rec, err = r.next()
			if err == nil && rec == nil {
				break
			}
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
