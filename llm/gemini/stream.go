package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/llm"
)

// decodeStream reads a streamGenerateContent?alt=sse body, calling emit
// for each event, and returns the assembled response. Protocol failures are
// *llm.Error; a failure to read r is returned as it is, for the caller to
// normalize.
func decodeStream(r io.Reader, structured bool, emit func(llm.StreamEvent)) (*llm.Response, error) {
	dec := sse.NewDecoder(r)
	a := &assembler{structured: structured, emit: emit}
	for {
		ev, err := dec.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, sse.ErrTooLarge) {
			return nil, llm.NewError(llm.InvalidResponse, name, "stream event too large", err)
		}
		if err != nil {
			return nil, err
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		var chunk generateResponse
		if err := json.Unmarshal(data, &chunk); err != nil {
			return nil, llm.NewError(llm.InvalidResponse, name, "malformed stream event", err)
		}
		if err := a.add(&chunk); err != nil {
			return nil, err
		}
	}
	if !a.done() {
		return nil, invalidResponse("stream truncated: it ended before a finish reason")
	}
	resp, err := a.finish()
	if err != nil {
		return nil, err
	}
	a.send(llm.MessageStop, 0, llm.EventDelta{})
	return resp, nil
}
