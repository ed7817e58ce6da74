package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/internal/telemetry"
)

// ClientOptions configures a Client; the zero value works.
type ClientOptions struct {
	// HTTPClient is the transport; nil uses one with a 60 s timeout.
	HTTPClient *http.Client
	// BearerToken is sent as "Authorization: Bearer …" when set.
	BearerToken string
	// MaxResponseBytes bounds a response body; 0 means 16 MiB.
	MaxResponseBytes int64
}

// Client speaks UAIP-0.1 to any server. Its methods return *Error for
// the server's error responses (status, detail and the extras), matching
// the sentinels with errors.Is as the engine's errors do; transport
// failures are returned as they are. It is safe for concurrent use.
type Client struct {
	base string
	opts ClientOptions
}

// NewClient returns a client for the server at baseURL
// (e.g. "http://127.0.0.1:8080"); opts may be nil.
func NewClient(baseURL string, opts *ClientOptions) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/")}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.HTTPClient == nil {
		c.opts.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if c.opts.MaxResponseBytes <= 0 {
		c.opts.MaxResponseBytes = 16 << 20
	}
	return c
}

// Initialize creates a session (POST /initialize).
func (c *Client) Initialize(ctx context.Context, workflowName string) (*InitializeResponse, error) {
	var out InitializeResponse
	if _, err := c.do(ctx, http.MethodPost, "/initialize", "", map[string]string{"workflow_name": workflowName}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Execute runs an action in a session (POST /execute).
func (c *Client) Execute(ctx context.Context, sessionID string, req *ExecuteRequest) (*ExecuteResponse, error) {
	var out ExecuteResponse
	if _, err := c.do(ctx, http.MethodPost, "/execute", sessionID, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Call invokes a task of the current stage.
func (c *Client) Call(ctx context.Context, sessionID, workflowName, task string, args map[string]any) (*ExecuteResponse, error) {
	return c.Execute(ctx, sessionID, &ExecuteRequest{WorkflowName: workflowName, Action: ActionMethodCall, Task: task, Args: args})
}

// Transition moves the session to another stage.
func (c *Client) Transition(ctx context.Context, sessionID, workflowName, stage string) (*ExecuteResponse, error) {
	return c.Execute(ctx, sessionID, &ExecuteRequest{WorkflowName: workflowName, Action: ActionStageTransition, Stage: stage})
}

// SetState updates session state keys (a nil value deletes a key).
func (c *Client) SetState(ctx context.Context, sessionID, workflowName string, updates map[string]any) (*ExecuteResponse, error) {
	if updates == nil {
		updates = map[string]any{}
	}
	return c.Execute(ctx, sessionID, &ExecuteRequest{WorkflowName: workflowName, Action: ActionStateInput, StateUpdates: updates})
}

// Workflow returns a workflow's schema (GET /api/workflows/{name}).
func (c *Client) Workflow(ctx context.Context, name string) (*WorkflowInfo, error) {
	var out WorkflowInfo
	if _, err := c.do(ctx, http.MethodGet, "/api/workflows/"+url.PathEscape(name), "", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Workflows lists the server's workflows (GET /api/workflows, an agentry
// extension).
func (c *Client) Workflows(ctx context.Context) ([]WorkflowSummary, error) {
	var out struct {
		Workflows []WorkflowSummary `json:"workflows"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/api/workflows", "", nil, &out); err != nil {
		return nil, err
	}
	return out.Workflows, nil
}

// Session returns a session's stage and state (GET /api/sessions/{id}, an
// agentry extension).
func (c *Client) Session(ctx context.Context, id string) (*Session, error) {
	var out Session
	if _, err := c.do(ctx, http.MethodGet, "/api/sessions/"+url.PathEscape(id), "", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSession ends a session (DELETE /api/sessions/{id}, an agentry
// extension).
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/sessions/"+url.PathEscape(id), "", nil, nil)
	return err
}

func (c *Client) do(ctx context.Context, method, path, sessionID string, body, out any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("uaip client: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("uaip client: %w", err)
	}
	telemetry.Inject(ctx, req.Header)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if sessionID != "" {
		req.Header.Set(headerSessionID, sessionID)
	}
	if c.opts.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.BearerToken)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("uaip client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("uaip client: reading %s: %w", path, err)
	}
	if int64(len(data)) > c.opts.MaxResponseBytes {
		return nil, fmt.Errorf("uaip client: %s response exceeds %d bytes", path, c.opts.MaxResponseBytes)
	}
	if resp.StatusCode >= 300 {
		return resp, clientError(resp.StatusCode, data)
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp, fmt.Errorf("uaip client: %s returned invalid JSON: %w", path, err)
		}
	}
	return resp, nil
}

// clientError turns an error response into an *Error whose sentinel is
// inferred from the status and, for 404 and 422, the body.
func clientError(status int, data []byte) *Error {
	var body errorBody
	if json.Unmarshal(data, &body) != nil || body.Detail == "" {
		body.Detail = strings.TrimSpace(string(data))
		if body.Detail == "" {
			body.Detail = http.StatusText(status)
		}
	}
	e := &Error{Status: status, Detail: body.Detail, Missing: body.Missing, Errors: body.Errors, Allowed: body.Allowed}
	d := strings.ToLower(body.Detail)
	switch status {
	case http.StatusBadRequest:
		e.kind = ErrBadRequest
		if strings.Contains(d, "session") && strings.Contains(d, "header") {
			e.kind = ErrMissingSession
		}
	case http.StatusNotFound:
		e.kind = ErrSessionNotFound
		if strings.Contains(d, "workflow") {
			e.kind = ErrWorkflowNotFound
		}
	case http.StatusUnprocessableEntity:
		switch {
		case len(body.Missing) > 0 || strings.Contains(d, "prerequisite") || strings.Contains(d, "cannot enter"):
			e.kind = ErrPrerequisites
		case len(body.Errors) > 0 || strings.Contains(d, "invalid arguments"):
			e.kind = ErrInvalidArguments
		case strings.Contains(d, "action"):
			e.kind = ErrInvalidAction
		case strings.Contains(d, "transition"):
			e.kind = ErrInvalidTransition
		case strings.Contains(d, "not available") || strings.Contains(d, "not in current stage") || strings.Contains(d, "task not"):
			e.kind = ErrTaskNotInStage
		default:
			e.kind = ErrTaskFailed
		}
	case http.StatusConflict:
		e.kind = ErrConflict
	case http.StatusRequestEntityTooLarge:
		e.kind = ErrTooLarge
	case http.StatusUnauthorized, http.StatusForbidden:
		e.kind = ErrUnauthorized
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		e.kind = ErrTaskUnavailable
	default:
		e.kind = ErrInternal
	}
	return e
}
