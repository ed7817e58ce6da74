package memstore_test

import (
	"testing"

	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/agentry-dev/agentry/workflow/sessiontest"
)

func TestUAIP_Session_MemStore(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) workflow.SessionStore { return memstore.New().Sessions() })
}
