package uiapsession_test

import (
	"testing"

	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/agentry-dev/agentry/internal/uiapsession/uiapsessiontest"
)

func TestUIAP_8_2_SessionStore_Memory(t *testing.T) {
	uiapsessiontest.Run(t, func(t *testing.T) uiapsession.Store { return uiapsession.NewMemory() })
}
