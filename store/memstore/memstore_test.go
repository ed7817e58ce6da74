package memstore_test

import (
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/checkpoint/storetest"
	"github.com/agentry-dev/agentry/store/memstore"
)

func TestUAP_12_2_MemStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) agent.CheckpointStore { return memstore.New().Checkpoints() })
}
