package uiapconformance_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapconformance"
)

// TestConformanceAgainstOurApp: every check passes against a uicontrol
// App served over ws@0.1.
func TestConformanceAgainstOurApp(t *testing.T) {
	app := uicontrol.NewApp(nil)
	t.Cleanup(func() { app.Close() })
	srv := httptest.NewServer(uicontrol.NewWSHandler(app.Serve, nil))
	t.Cleanup(srv.Close)
	rep, err := uiapconformance.Run(context.Background(), &uiapconformance.Options{URL: "ws" + strings.TrimPrefix(srv.URL, "http")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if !r.Passed {
			t.Errorf("%s (%s): %s; got %s", r.Name, r.Clause, r.Expectation, r.Got)
		}
	}
	if rep.Passed() != 15 || rep.Failed() != 0 {
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
	rep, err := uiapconformance.Run(context.Background(), &uiapconformance.Options{URL: "ws" + strings.TrimPrefix(srv.URL, "http"), Timeout: 300e6})
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
	if _, err := uiapconformance.Run(context.Background(), &uiapconformance.Options{URL: "http://x"}); err == nil {
		t.Error("Run accepted an http URL")
	}
}

// silentResume is a transport that drops the errors answering
// session.resume: an app that leaves an invalid resume unanswered.
type silentResume struct{ uicontrol.Transport }

func (s silentResume) Send(ctx context.Context, msg []byte) error {
	var m struct {
		Kind    string `json:"kind"`
		Payload struct {
			FailedType string `json:"failedType"`
		} `json:"payload"`
	}
	if json.Unmarshal(msg, &m) == nil && m.Kind == "error" && m.Payload.FailedType == uiapwire.TypeResume {
		return nil
	}
	return s.Transport.Send(ctx, msg)
}

// TestConformanceDetectsAnUnansweredResume: an app that does not answer
// an invalid session.resume — over the interrupted session's own
// connection or any other — fails the checks of §8.2 and of one answer
// per request (§5, §10), and only those.
func TestConformanceDetectsAnUnansweredResume(t *testing.T) {
	app := uicontrol.NewApp(nil)
	t.Cleanup(func() { app.Close() })
	serve := func(ctx context.Context, tr uicontrol.Transport) error { return app.Serve(ctx, silentResume{tr}) }
	srv := httptest.NewServer(uicontrol.NewWSHandler(serve, nil))
	t.Cleanup(srv.Close)
	// The default timeout (10 s) is what each of the three failing checks
	// waits for the answer that never comes.
	rep, err := uiapconformance.Run(context.Background(), &uiapconformance.Options{URL: "ws" + strings.TrimPrefix(srv.URL, "http")})
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, r := range rep.Results {
		if !r.Passed {
			failed = append(failed, r.Name)
			if !strings.Contains(r.Got, "session.resume") || !strings.Contains(r.Got, "no answer") {
				t.Errorf("%s: got %q, want it to say the resume had no answer", r.Name, r.Got)
			}
		}
	}
	want := []string{"session/resume-invalid-token", "session/resume-unknown-session", "errors/one-answer-per-request"}
	if !slices.Equal(failed, want) {
		t.Errorf("failed checks %v, want %v", failed, want)
	}
}
