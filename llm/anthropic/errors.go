package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/agentry-dev/agentry/llm"
)

// apiError is the error object of an error body or stream event:
// {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}.
type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Details *struct {
		ErrorCode string `json:"error_code"`
	} `json:"details"`
}

// errorCode maps an Anthropic error type (and, for some, its message) to a
// UPP code; "" means the type says nothing more than the HTTP status.
func errorCode(e *apiError) llm.ErrorCode {
	msg := strings.ToLower(e.Message)
	switch e.Type {
	case "authentication_error", "permission_error":
		return llm.AuthenticationFailed
	case "not_found_error":
		return llm.ModelNotFound
	case "rate_limit_error":
		if e.Details != nil && e.Details.ErrorCode == "enforced_spend_limit_reached" {
			return llm.QuotaExceeded // waiting will not help until the limit resets
		}
		return llm.RateLimited
	case "overloaded_error", "api_error":
		return llm.ProviderError
	case "timeout_error":
		return llm.Timeout
	case "request_too_large":
		return llm.ContextLengthExceeded
	case "billing_error":
		return llm.QuotaExceeded
	case "invalid_request_error":
		switch {
		case strings.Contains(msg, "prompt is too long"),
			strings.Contains(msg, "context window"),
			strings.Contains(msg, "context limit"),
			strings.Contains(msg, "context length"):
			return llm.ContextLengthExceeded
		case strings.Contains(msg, "credit balance"),
			strings.Contains(msg, "spend limit"),
			strings.Contains(msg, "usage limit"):
			return llm.QuotaExceeded
		}
		return llm.InvalidRequest
	}
	return ""
}

func (e *apiError) text() string {
	switch {
	case e.Type == "":
		return e.Message
	case e.Message == "":
		return e.Type
	}
	return e.Type + ": " + e.Message
}

// parseError reads an error response body (wire.Client.ParseError): the
// vendor's message, and a code refined from its error type.
func parseError(status int, body []byte) (string, llm.ErrorCode) {
	var env struct {
		Error     *apiError `json:"error"`
		RequestID string    `json:"request_id"`
	}
	if json.Unmarshal(body, &env) != nil || env.Error == nil || (env.Error.Type == "" && env.Error.Message == "") {
		return "", ""
	}
	msg := env.Error.text()
	if env.RequestID != "" {
		msg += " (request " + env.RequestID + ")"
	}
	return msg, errorCode(env.Error)
}

// eventError converts an in-stream error event (or an error body that came
// with a 2xx status) to an *llm.Error; an unknown type is PROVIDER_ERROR.
func eventError(e *apiError) *llm.Error {
	if e == nil || (e.Type == "" && e.Message == "") {
		return llm.NewError(llm.ProviderError, name, "error event without details", nil)
	}
	code := errorCode(e)
	if code == "" {
		code = llm.ProviderError
	}
	return llm.NewError(code, name, e.text(), nil)
}
