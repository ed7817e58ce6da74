package gemini

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/internal/wire"
)

// apiError is the Google API error object: {"error": {code, message,
// status, details}}.
type apiError struct {
	Code    int           `json:"code"`
	Message string        `json:"message"`
	Status  string        `json:"status"`
	Details []errorDetail `json:"details"`
}

type errorDetail struct {
	Type       string `json:"@type"`
	Reason     string `json:"reason"`
	RetryDelay string `json:"retryDelay"` // google.rpc.RetryInfo, e.g. "23s"
}

// retryDelay reads the delay a google.rpc.RetryInfo detail asks for; it is
// wire.Client.RetryDelay, as Gemini states its delay in the body.
func retryDelay(body []byte) time.Duration {
	e := decodeAPIError(body)
	if e == nil {
		return 0
	}
	for _, d := range e.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") && d.RetryDelay != "" {
			if v, err := time.ParseDuration(d.RetryDelay); err == nil && v > 0 {
				return v
			}
		}
	}
	return 0
}

type errorBody struct {
	Error *apiError `json:"error"`
}

// parseError reads a Gemini error body (an object, or an array holding one,
// as the non-SSE streaming endpoint answers) and refines the status-derived
// code. It is wire.Client.ParseError.
func parseError(status int, body []byte) (string, llm.ErrorCode) {
	e := decodeAPIError(body)
	if e == nil {
		return "", ""
	}
	return e.message(), e.code(status)
}

func decodeAPIError(body []byte) *apiError {
	body = bytes.TrimSpace(body)
	var b errorBody
	if len(body) > 0 && body[0] == '[' {
		var arr []errorBody
		if json.Unmarshal(body, &arr) != nil || len(arr) == 0 {
			return nil
		}
		b = arr[0]
	} else if json.Unmarshal(body, &b) != nil {
		return nil
	}
	if b.Error == nil || (b.Error.Message == "" && b.Error.Status == "" && b.Error.Code == 0) {
		return nil
	}
	return b.Error
}

func (e *apiError) message() string {
	msg := strings.TrimSpace(e.Message)
	if msg == "" {
		msg = e.Status
	}
	if e.Status != "" && msg != e.Status {
		msg = e.Status + ": " + msg
	}
	if len(msg) > 1000 {
		msg = msg[:1000] + "…"
	}
	return msg
}

func (e *apiError) hasDetail(typeSuffix, reason string) bool {
	for _, d := range e.Details {
		if (typeSuffix == "" || strings.HasSuffix(d.Type, typeSuffix)) && (reason == "" || d.Reason == reason) {
			return true
		}
	}
	return false
}

// code maps the error to a UPP code; status is the HTTP status (0 for an
// error event inside a stream). An empty result keeps the status-derived
// code.
func (e *apiError) code(status int) llm.ErrorCode {
	msg := strings.ToLower(e.Message)
	switch {
	case e.hasDetail("", "API_KEY_INVALID") || strings.Contains(msg, "api key not valid") || strings.Contains(msg, "api key expired"):
		return llm.AuthenticationFailed
	case isContextLength(msg):
		return llm.ContextLengthExceeded
	}
	switch e.Status {
	case "RESOURCE_EXHAUSTED":
		if isQuota(msg) && !e.hasDetail("google.rpc.RetryInfo", "") {
			return llm.QuotaExceeded
		}
		return llm.RateLimited
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return llm.InvalidRequest
	case "PERMISSION_DENIED", "UNAUTHENTICATED":
		return llm.AuthenticationFailed
	case "NOT_FOUND":
		return llm.ModelNotFound
	case "UNAVAILABLE", "INTERNAL", "UNKNOWN", "DEADLINE_EXCEEDED", "ABORTED", "DATA_LOSS":
		return llm.ProviderError
	}
	if status == 0 && e.Code != 0 {
		return wire.CodeForStatus(e.Code)
	}
	return ""
}

// isQuota reports a message about an exhausted quota or budget, as opposed
// to the generic "Resource has been exhausted (e.g. check quota)." of a rate
// limit.
func isQuota(msg string) bool {
	for _, s := range []string{"exceeded your current quota", "quota exceeded", "insufficient quota", "billing", "credits"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// isContextLength reports a message about the input exceeding the model's
// token limit, e.g. "The input token count (1200000) exceeds the maximum
// number of tokens allowed (1048576)."
func isContextLength(msg string) bool {
	return strings.Contains(msg, "exceeds the maximum number of tokens") ||
		(strings.Contains(msg, "token count") && strings.Contains(msg, "exceeds")) ||
		strings.Contains(msg, "context length") || strings.Contains(msg, "context window")
}

// streamError converts an error event of a stream to an *llm.Error.
func streamError(e *apiError) *llm.Error {
	code := e.code(0)
	if code == "" {
		code = llm.ProviderError
	}
	return llm.NewError(code, name, e.message(), nil)
}
