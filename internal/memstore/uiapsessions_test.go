package memstore

import (
	"testing"

	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/agentry-dev/agentry/internal/uiapsession/uiapsessiontest"
)

func TestUIAP_8_2_SessionStore(t *testing.T) {
	uiapsessiontest.Run(t, func(t *testing.T) uiapsession.Store { return New().UIAPSessions() })
}
