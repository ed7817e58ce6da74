package memstore_test

import (
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/journaltest"
	"github.com/agentry-dev/agentry/internal/memstore"
)

func TestUAICP_5_4_Journal_MemStore(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) govern.Journal { return memstore.New().Journal() })
}

func TestJournalIsOnePerStore(t *testing.T) {
	s := memstore.New()
	if s.Journal() != s.Journal() {
		t.Error("two calls returned two journals")
	}
	if memstore.New().Journal() == s.Journal() {
		t.Error("two stores share a journal")
	}
}
