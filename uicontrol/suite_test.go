package uicontrol_test

import (
	"testing"

	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiaptest"
)

// TestUIAP_Pair runs the conformance suite over the in-process Pair.
func TestUIAP_Pair(t *testing.T) {
	uiaptest.Run(t, func(t *testing.T) (app, agent uicontrol.Transport) { return uicontrol.Pair() })
}
