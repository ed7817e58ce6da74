package uiaptest

import (
	"testing"
	"testing/synctest"

	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/agentry-dev/agentry/uicontrol"
)

// TestUIAP_StoredSessions runs every case with the apps keeping their
// sessions in a store (AppOptions.Sessions), one per case: what an agent
// sees must not change.
func TestUIAP_StoredSessions(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := uiapsession.NewMemory()
				c.run(&h{T: t, newPair: func(t *testing.T) (app, agent uicontrol.Transport) { return uicontrol.Pair() },
					appMod: func(o *uicontrol.AppOptions) {
						if o.Sessions == nil {
							o.Sessions = st
						}
					}})
			})
		})
	}
}
