package sqlstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"

	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/agentry-dev/agentry/internal/uiapsession/uiapsessiontest"
)

func TestUIAP_8_2_SessionStore_SQLite(t *testing.T) {
	uiapsessiontest.Run(t, func(t *testing.T) uiapsession.Store { return openT(t, sqliteURL(t)).UIAPSessions() })
}

func TestUIAP_8_2_SessionStore_SQLiteMemory(t *testing.T) {
	uiapsessiontest.Run(t, func(t *testing.T) uiapsession.Store { return openT(t, "memory:").UIAPSessions() })
}

func TestUIAP_8_2_SessionStore_PostgreSQL(t *testing.T) {
	postgresURL(t) // skip early when unset
	uiapsessiontest.Run(t, func(t *testing.T) uiapsession.Store { return openT(t, postgresURL(t)).UIAPSessions() })
}

// TestUIAP_8_2_ResumeRaceAcrossStores: two Stores on one database — two
// replicas — claim each session with the same resume token at once:
// exactly one claim of each session wins, and the loser's replica, still
// holding the old version, can no longer append.
func TestUIAP_8_2_ResumeRaceAcrossStores(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			a, b := openT(t, u).UIAPSessions(), openT(t, u).UIAPSessions()
			now := time.Now()
			token := sha256.Sum256([]byte("token"))
			const n = 20
			var sessions []string
			for range n {
				id := ids.New()
				if err := a.Create(t.Context(), &uiapsession.Session{ID: id, TokenHash: token[:], State: []byte(`{}`), ExpiresAt: now.Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
				sessions = append(sessions, id)
			}
			var wg sync.WaitGroup
			wins := make([][2]bool, n)
			for i, id := range sessions {
				for r, st := range []uiapsession.Store{a, b} {
					wg.Go(func() {
						next := sha256.Sum256([]byte{byte(r)})
						_, err := st.Claim(context.Background(), id, token[:], next[:], now.Add(time.Hour), now)
						switch {
						case err == nil:
							wins[i][r] = true
						case !errors.Is(err, uiapsession.ErrConflict):
							t.Errorf("session %d, replica %d: %v", i, r, err)
						}
					})
				}
			}
			wg.Wait()
			for i, w := range wins {
				if w[0] == w[1] {
					t.Errorf("session %d: wins %v, want exactly one", i, w)
				}
				if err := a.Append(t.Context(), sessions[i], 1, uiapsession.Event{Seq: 1, Data: []byte(`{}`)}, 8); !errors.Is(err, uiapsession.ErrConflict) {
					t.Errorf("session %d: append at the old version = %v, want ErrConflict", i, err)
				}
			}
		})
	}
}
