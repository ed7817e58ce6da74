package memstore_test

import (
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/checkpointtest"
	"github.com/agentry-dev/agentry/internal/memstore"
)

func TestUAP_12_2_MemStore(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) agent.CheckpointStore { return memstore.New().Checkpoints() })
}
