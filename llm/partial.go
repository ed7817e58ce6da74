package llm

import "encoding/json"

// parsePartialJSON parses the longest usable prefix of incomplete JSON
// text, such as the accumulated fragments of a streamed object: open
// strings, arrays and objects are closed, and a trailing incomplete member
// (a key without a value, a half-written number or literal) is dropped.
// ok is false when not even a prefix is usable.
//
//	ParsePartialJSON(`{"name": "Ad`)       // map[name:Ad]
//	ParsePartialJSON(`{"a": 1, "b": [2, `) // map[a:1 b:[2]]
func parsePartialJSON(s string) (v any, ok bool) {
	if json.Unmarshal([]byte(s), &v) == nil {
		return v, true
	}
	type frame struct{ object, expectKey bool }
	type cut struct {
		at     int
		quote  bool
		closer string
	}
	var (
		stack  []frame
		inStr  bool
		isKey  bool
		escape bool
		cuts   [6]cut // the most recent candidate cut points
		ncuts  int
	)
	closers := func() string {
		b := make([]byte, len(stack))
		for i := range stack {
			if stack[len(stack)-1-i].object {
				b[i] = '}'
			} else {
				b[i] = ']'
			}
		}
		return string(b)
	}
	add := func(c cut) {
		if ncuts > 0 && cuts[(ncuts-1)%len(cuts)].quote && c.quote {
			cuts[(ncuts-1)%len(cuts)] = c // keep one candidate per open string
			return
		}
		cuts[ncuts%len(cuts)] = c
		ncuts++
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch {
			case escape:
				escape = false
			case c == '\\':
				escape = true
			case c == '"':
				inStr = false
				if !isKey && len(stack) > 0 {
					add(cut{at: i + 1, closer: closers()})
				}
			default:
				if !isKey && len(stack) > 0 && c < 0x80 {
					add(cut{at: i + 1, quote: true, closer: closers()})
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			isKey = len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].expectKey
		case '{', '[':
			stack = append(stack, frame{object: c == '{', expectKey: c == '{'})
			add(cut{at: i + 1, closer: closers()})
		case '}', ']':
			if len(stack) == 0 {
				return nil, false
			}
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				add(cut{at: i + 1, closer: closers()})
			}
		case ':':
			if len(stack) > 0 {
				stack[len(stack)-1].expectKey = false
			}
		case ',':
			if len(stack) > 0 {
				add(cut{at: i, closer: closers()})
				if stack[len(stack)-1].object {
					stack[len(stack)-1].expectKey = true
				}
			}
		}
	}
	try := func(prefix string, quote bool, closer string) (any, bool) {
		b := make([]byte, 0, len(prefix)+len(closer)+1)
		b = append(b, prefix...)
		if quote {
			b = append(b, '"')
		}
		b = append(b, closer...)
		var out any
		if json.Unmarshal(b, &out) == nil {
			return out, true
		}
		return nil, false
	}
	if (len(stack) > 0 || inStr) && !(inStr && (isKey || escape)) {
		if v, ok := try(s, inStr, closers()); ok {
			return v, true
		}
	}
	for k := 0; k < len(cuts) && k < ncuts; k++ {
		c := cuts[(ncuts-1-k)%len(cuts)]
		if v, ok := try(s[:c.at], c.quote, c.closer); ok {
			return v, true
		}
	}
	return nil, false
}
