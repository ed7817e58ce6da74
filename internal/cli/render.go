package cli

import (
	"fmt"
	"io"
	"strings"
)

// Labels of what a model streams that is not the answer, on stderr.
const (
	labelThinking  = "[thinking] "  // the model's reasoning blocks
	labelReasoning = "[reasoning] " // a ReAct step's reasoning reply
	labelModel     = "[model] "     // a reply's words around its tool calls, a plan step's reply
)

// textOut routes a model's streamed text for people, each piece once: the
// answer to stdout, everything else to stderr under a label. A reply that
// calls tools is not the answer: with tools declared (hold), a reply's
// text is held until the reply ends without calling one, and goes to
// stderr as soon as it calls one. Without tools every reply is an answer
// and streams to stdout as it arrives.
type textOut struct {
	out, err io.Writer
	hold     bool

	label   string          // the stderr block open, "" when none
	outOpen bool            // a line on stdout is unfinished
	held    strings.Builder // the current reply's text, not yet known to be the answer
	calls   bool            // the current reply calls tools
}

// note writes text to stderr under label, continuing the open block when
// it has the same label.
func (t *textOut) note(label, text string) {
	if text == "" {
		return
	}
	if t.label != label {
		t.endLine()
		fmt.Fprint(t.err, label)
		t.label = label
	}
	fmt.Fprint(t.err, text)
}

// endLine finishes the open stderr block and the unfinished stdout line.
func (t *textOut) endLine() {
	if t.label != "" {
		fmt.Fprintln(t.err)
		t.label = ""
	}
	if t.outOpen {
		fmt.Fprintln(t.out)
		t.outOpen = false
	}
}

// line writes a whole line to stderr.
func (t *textOut) line(s string) {
	t.endLine()
	fmt.Fprintln(t.err, s)
}

// answer is text of the current reply that is the answer unless the
// reply calls tools.
func (t *textOut) answer(text string) {
	switch {
	case t.calls:
		t.note(labelModel, text)
	case t.hold:
		t.held.WriteString(text)
	default:
		t.toStdout(text)
	}
}

func (t *textOut) toStdout(text string) {
	if text == "" {
		return
	}
	if t.label != "" {
		fmt.Fprintln(t.err)
		t.label = ""
	}
	fmt.Fprint(t.out, text)
	t.outOpen = !strings.HasSuffix(text, "\n")
}

// toolCall marks the current reply as calling tools: its text is not the
// answer.
func (t *textOut) toolCall() {
	if t.calls {
		return
	}
	t.calls = true
	t.note(labelModel, t.held.String())
	t.held.Reset()
}

// messageStart begins a reply.
func (t *textOut) messageStart() {
	t.calls = false
	t.held.Reset()
}

// messageStop ends a reply: held text is the answer.
func (t *textOut) messageStop() {
	t.toStdout(t.held.String())
	t.held.Reset()
	t.calls = false
	t.endLine()
}
