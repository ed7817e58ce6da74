package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
)

// Thread is a conversation history (UPP-1.3 §8). It is optional: a plain
// []Message works as history too. A Thread is safe for concurrent use.
type Thread struct {
	mu        sync.RWMutex
	id        string
	messages  []Message
	createdAt time.Time
	updatedAt time.Time
}

// NewThread returns an empty thread with a new ID.
func NewThread(messages ...Message) *Thread {
	now := ids.Now()
	return &Thread{id: ids.New(), messages: slices.Clone(messages), createdAt: now, updatedAt: now}
}

// ID returns the thread's ID.
func (t *Thread) ID() string { return t.id }

// Messages returns a copy of the messages, for use as history.
func (t *Thread) Messages() []Message {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Clone(t.messages)
}

// Len returns the number of messages.
func (t *Thread) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.messages)
}

// Append adds a turn's messages.
func (t *Thread) Append(turn *Turn) {
	if turn != nil {
		t.Push(turn.Messages...)
	}
}

// Push adds messages.
func (t *Thread) Push(messages ...Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.messages = append(t.messages, messages...)
	t.updatedAt = ids.Now()
}

// Clear removes every message.
func (t *Thread) Clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.messages = nil
	t.updatedAt = ids.Now()
}

// CreatedAt returns when the thread was created.
func (t *Thread) CreatedAt() time.Time { return t.createdAt }

// UpdatedAt returns when the thread last changed.
func (t *Thread) UpdatedAt() time.Time {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.updatedAt
}

type threadJSON struct {
	ID        string      `json:"id"`
	Messages  messageList `json:"messages"`
	CreatedAt string      `json:"createdAt"`
	UpdatedAt string      `json:"updatedAt"`
}

// MarshalJSON emits ThreadJSON {id, messages, createdAt, updatedAt}, with
// message bytes base64-encoded.
func (t *Thread) MarshalJSON() ([]byte, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return json.Marshal(threadJSON{t.id, messageList(t.messages), formatTime(t.createdAt), formatTime(t.updatedAt)})
}

// UnmarshalJSON reads ThreadJSON.
func (t *Thread) UnmarshalJSON(data []byte) error {
	var j threadJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("thread: %w", err)
	}
	if j.ID == "" {
		return errors.New("thread: id missing")
	}
	created, err := parseTime("thread createdAt", j.CreatedAt)
	if err != nil {
		return err
	}
	updated, err := parseTime("thread updatedAt", j.UpdatedAt)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.id, t.messages, t.createdAt, t.updatedAt = j.ID, j.Messages, created, updated
	return nil
}
