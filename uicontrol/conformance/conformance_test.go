package conformance_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/conformance"
)

// TestConformanceAgainstOurApp: every check passes against a uicontrol
// App served over ws@0.1.
func TestConformanceAgainstOurApp(t *testing.T) {
	app := uicontrol.NewApp(nil)
	t.Cleanup(func() { app.Close() })
	srv := httptest.NewServer(uicontrol.NewWSHandler(app.Serve, nil))
	t.Cleanup(srv.Close)
	rep, err := conformance.Run(context.Background(), conformance.Options{URL: "ws" + strings.TrimPrefix(srv.URL, "http")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if !r.Passed {
			t.Errorf("%s (%s): %s; got %s", r.Name, r.Clause, r.Expectation, r.Got)
		}
	}
	if rep.Passed() != 12 || rep.Failed() != 0 {
		t.Errorf("%d passed, %d failed", rep.Passed(), rep.Failed())
	}
}

// TestConformanceDetectsABrokenApp: an endpoint that answers nothing
// fails every check instead of passing vacuously.
func TestConformanceDetectsABrokenApp(t *testing.T) {
	mute := func(ctx context.Context, tr uicontrol.Transport) error {
		for {
			if _, err := tr.Receive(ctx); err != nil {
				return err
			}
		}
	}
	srv := httptest.NewServer(uicontrol.NewWSHandler(mute, nil))
	t.Cleanup(srv.Close)
	rep, err := conformance.Run(context.Background(), conformance.Options{URL: "ws" + strings.TrimPrefix(srv.URL, "http"), Timeout: 300e6})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed() != 0 {
		for _, r := range rep.Results {
			if r.Passed {
				t.Errorf("%s passed against a mute app", r.Name)
			}
		}
	}
	if _, err := conformance.Run(context.Background(), conformance.Options{URL: "http://x"}); err == nil {
		t.Error("Run accepted an http URL")
	}
}
