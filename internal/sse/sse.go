// Package sse reads and writes Server-Sent Events as the WHATWG HTML
// standard defines the text/event-stream format (§9.2 "Server-sent
// events"): lines end in CRLF, LF or CR; "data" lines accumulate; a blank
// line dispatches; comments start with a colon; one leading space after the
// colon is dropped; a stream that ends mid-event drops that event.
//
// It is used by the LLM providers (vendor streams) and the UAMP binding.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Event is one dispatched event.
type Event struct {
	// Type is the "event" field; empty means the default type "message".
	Type string
	// Data is the "data" lines joined by "\n". It is valid only until the
	// next call to Next.
	Data []byte
	// ID is the last event ID seen (it persists across events, as the
	// standard says).
	ID string
	// Retry is the last "retry" value in milliseconds, or -1.
	Retry int
}

// ErrTooLarge reports a line or event larger than the decoder's limit.
var ErrTooLarge = errors.New("sse: event exceeds size limit")

// DefaultMaxEventSize bounds one event's data (and any single line).
const DefaultMaxEventSize = 16 << 20

// Decoder reads events from a stream.
type Decoder struct {
	r        io.Reader
	buf      []byte // unread input is buf[start:end]
	start    int
	end      int
	scanned  int // buf[start:start+scanned] holds no line end
	eof      bool
	ended    bool // Next has returned the end of the stream
	err      error
	started  bool
	afterCR  bool // the previous line ended in CR: skip a following LF
	max      int
	data     []byte
	hasData  bool
	evType   string
	lastType string
	lastID   string
	retry    int
	sawField bool
}

// NewDecoder returns a decoder reading r with DefaultMaxEventSize.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: r, buf: make([]byte, 32<<10), max: DefaultMaxEventSize, retry: -1}
}

// SetMaxEventSize sets the limit on an event's data. A line may be longer
// by the length of "data: ", so that a data line at the limit fits.
func (d *Decoder) SetMaxEventSize(n int) { d.max = n }

// maxLine is the longest line accepted, without its terminator.
func (d *Decoder) maxLine() int {
	const overhead = len("data: ")
	if d.max > math.MaxInt-overhead-1 { // leave room for the terminator
		return math.MaxInt - overhead - 1
	}
	return d.max + overhead
}

// Next returns the next event. At the end of the stream it returns io.EOF;
// an event not terminated by a blank line before the end is dropped, and
// Truncated then reports true.
func (d *Decoder) Next() (Event, error) {
	for {
		line, err := d.line()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if ev, ok := d.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		d.sawField = true
		if err := d.field(line); err != nil {
			return Event{}, err
		}
	}
}

// Truncated reports whether the stream ended in the middle of an event.
func (d *Decoder) Truncated() bool { return d.ended && d.sawField }

func (d *Decoder) dispatch() (Event, bool) {
	d.sawField = false
	if !d.hasData {
		d.evType = ""
		return Event{}, false
	}
	ev := Event{Type: d.evType, Data: d.data, ID: d.lastID, Retry: d.retry}
	d.data, d.hasData, d.evType = d.data[:0], false, ""
	return ev, true
}

func (d *Decoder) field(line []byte) error {
	if line[0] == ':' {
		return nil // comment
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		size := len(d.data) + len(value)
		if d.hasData {
			size++ // the LF joining the lines
		}
		if size > d.max {
			return ErrTooLarge
		}
		if d.hasData {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
	case "event":
		if string(value) != d.lastType { // streams repeat a few types: reuse the string
			d.lastType = string(value)
		}
		d.evType = d.lastType
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			d.lastID = string(value)
		}
	case "retry":
		if n, err := strconv.Atoi(string(value)); err == nil && n >= 0 && isDigits(value) {
			d.retry = n
		}
	}
	return nil
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// line returns the next line without its terminator.
func (d *Decoder) line() ([]byte, error) {
	for {
		window := d.buf[d.start:d.end]
		if d.afterCR && len(window) > 0 {
			d.afterCR = false
			if window[0] == '\n' {
				d.start++
				continue
			}
		}
		if !d.started {
			if len(window) < 3 && !d.eof {
				d.fill()
				continue
			}
			d.started = true
			if bytes.HasPrefix(window, bom) {
				d.start += len(bom)
				continue
			}
		}
		i := lineEnd(window[d.scanned:])
		if i >= 0 {
			i += d.scanned
		}
		if i > d.maxLine() || i < 0 && len(window) > d.maxLine() {
			return nil, ErrTooLarge
		}
		if i >= 0 {
			line := window[:i]
			d.start += i + 1
			d.scanned = 0
			if window[i] == '\r' {
				d.afterCR = true
			}
			return line, nil
		}
		if d.eof {
			if len(window) > 0 { // final line without terminator: not a complete line
				d.sawField = true
				d.start, d.scanned = d.end, 0
			}
			d.ended = true
			if d.err != nil {
				return nil, d.err
			}
			return nil, io.EOF
		}
		d.scanned = len(window) // rescanning a long line on every read is quadratic
		d.fill()
	}
}

func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	scope := b
	if i >= 0 {
		scope = b[:i]
	}
	if j := bytes.IndexByte(scope, '\r'); j >= 0 {
		return j
	}
	return i
}

func (d *Decoder) fill() {
	if d.start > 0 { // slide unread bytes to the front
		n := copy(d.buf, d.buf[d.start:d.end])
		d.start, d.end = 0, n
	}
	if d.end == len(d.buf) { // line() has checked the window fits maxLine
		nb := make([]byte, min(2*len(d.buf), d.maxLine()+1))
		copy(nb, d.buf[:d.end])
		d.buf = nb
	}
	n, err := d.r.Read(d.buf[d.end:])
	d.end += n
	if err != nil {
		d.eof = true
		if err != io.EOF {
			d.err = err
		}
	}
}

var bom = []byte("\xEF\xBB\xBF")

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Write formats one event to w. Data containing newlines becomes several
// data lines; fields with CR or LF in type or id are rejected.
func Write(w io.Writer, ev Event) error {
	if strings.ContainsAny(ev.Type, "\r\n") || strings.ContainsAny(ev.ID, "\r\n\x00") {
		return fmt.Errorf("sse: event type or id contains a line break")
	}
	b := bufPool.Get().(*bytes.Buffer)
	defer func() {
		if b.Cap() <= 64<<10 {
			b.Reset()
			bufPool.Put(b)
		}
	}()
	b.Grow(len(ev.Data) + len(ev.Type) + len(ev.ID) + 32)
	if ev.ID != "" {
		b.WriteString("id: ")
		b.WriteString(ev.ID)
		b.WriteByte('\n')
	}
	if ev.Type != "" {
		b.WriteString("event: ")
		b.WriteString(ev.Type)
		b.WriteByte('\n')
	}
	if ev.Retry >= 0 && ev.Retry != 0 {
		b.WriteString("retry: ")
		b.WriteString(strconv.Itoa(ev.Retry))
		b.WriteByte('\n')
	}
	data := ev.Data
	for {
		i := lineEnd(data)
		b.WriteString("data: ")
		if i < 0 {
			b.Write(data)
			b.WriteByte('\n')
			break
		}
		b.Write(data[:i])
		b.WriteByte('\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// Stream is an event stream response being written.
type Stream struct {
	rc      *http.ResponseController
	timeout time.Duration
}

// Start begins an event stream response: the text/event-stream headers
// (not stored, not buffered by proxies) and a 200. Every write is bounded
// by writeTimeout (Extend before writing, Flush after), so that a reader
// that stopped reading cannot hold the writer.
func Start(w http.ResponseWriter, writeTimeout time.Duration) *Stream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies must not hold events back
	w.WriteHeader(http.StatusOK)
	return &Stream{rc: http.NewResponseController(w), timeout: writeTimeout}
}

// Extend moves the write deadline to writeTimeout from now.
func (s *Stream) Extend() { _ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) }

// Flush sends what was written, within writeTimeout from now.
func (s *Stream) Flush() error {
	s.Extend()
	return s.rc.Flush()
}
