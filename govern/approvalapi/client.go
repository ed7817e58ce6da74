package approvalapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/telemetry"
)

// maxResponseBytes bounds the answers Client reads.
const maxResponseBytes = 16 << 20

// defaultHTTPClient is used when Client.HTTPClient is nil.
var defaultHTTPClient = &http.Client{Timeout: 30 * time.Second}

// Client calls the approval API served by NewHandler. Error answers come
// back as *Error (errors.Is matches govern.ApprovalInvalid,
// govern.ErrUnknownApproval and govern.ErrAlreadyDecided); transport
// failures as they are. The zero value needs only BaseURL. It is safe for
// concurrent use.
type Client struct {
	// BaseURL is the server's base URL, e.g. "http://127.0.0.1:8080".
	BaseURL string
	// HTTPClient is the transport; nil uses one with a 30 s timeout.
	HTTPClient *http.Client
	// BearerToken is sent as "Authorization: Bearer …" when set.
	BearerToken string
}

// List returns the pending approval requests, oldest first; all adds the
// decided ones of runs still open.
func (c *Client) List(ctx context.Context, all bool) ([]govern.ApprovalRequest, error) {
	path := "/v1/approvals"
	if all {
		path += "?status=all"
	}
	var out approvalList
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	if out.Approvals == nil {
		out.Approvals = []govern.ApprovalRequest{}
	}
	return out.Approvals, nil
}

// Get returns one approval request.
func (c *Client) Get(ctx context.Context, id string) (govern.ApprovalRequest, error) {
	var out govern.ApprovalRequest
	err := c.onRequest(ctx, http.MethodGet, id, nil, &out)
	return out, err
}

// Approve approves a request with an approval token bound to it (see
// Sign) and returns the decided request.
func (c *Client) Approve(ctx context.Context, id, token string) (govern.ApprovalRequest, error) {
	var out govern.ApprovalRequest
	err := c.onRequest(ctx, http.MethodPost, id, map[string]string{"decision": decisionApprove, "token": token}, &out)
	return out, err
}

// Deny denies a request in approver's name and returns the decided
// request; reason may be empty.
func (c *Client) Deny(ctx context.Context, id, approver, reason string) (govern.ApprovalRequest, error) {
	body := map[string]string{"decision": decisionDeny, "approver": approver}
	if reason != "" {
		body["reason"] = reason
	}
	var out govern.ApprovalRequest
	err := c.onRequest(ctx, http.MethodPost, id, body, &out)
	return out, err
}

func (c *Client) onRequest(ctx context.Context, method, id string, body, out any) error {
	if id == "" {
		return errors.New("approvalapi: empty approval request ID")
	}
	return c.do(ctx, method, "/v1/approvals/"+url.PathEscape(id), body, out)
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("approvalapi: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("approvalapi: %w", err)
	}
	telemetry.Inject(ctx, req.Header)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.BearerToken)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("approvalapi: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("approvalapi: reading the answer to %s %s: %w", method, path, err)
	}
	if len(data) > maxResponseBytes {
		return fmt.Errorf("approvalapi: the answer to %s %s exceeds %d bytes", method, path, maxResponseBytes)
	}
	if resp.StatusCode >= 300 {
		return errorFrom(resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("approvalapi: %s %s answered invalid JSON: %w", method, path, err)
	}
	return nil
}

// errorFrom reads an error answer; a body of another shape (a proxy's
// page) becomes the message, clipped.
func errorFrom(status int, data []byte) *Error {
	var b errorBody
	if json.Unmarshal(data, &b) == nil && b.Error.Code != "" {
		return &Error{Status: status, Code: b.Error.Code, Message: b.Error.Message}
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{Status: status, Message: msg}
}
