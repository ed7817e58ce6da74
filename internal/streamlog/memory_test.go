package streamlog_test

import (
	"testing"

	"github.com/agentry-dev/agentry/internal/streamlog"
	"github.com/agentry-dev/agentry/internal/streamlog/streamlogtest"
)

func TestUAMP_5_StreamLogMemory(t *testing.T) {
	streamlogtest.Run(t, func(t *testing.T) streamlog.Store { return streamlog.NewMemory() })
}
