package llmtest

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// Vendor is one vendor's wire format, as NewServer speaks it. The server
// calls its methods from its handler goroutines, possibly at once.
type Vendor interface {
	// Observe decodes a request the provider sent; body is its content.
	// The result's Stream field decides how the reply is rendered. An
	// error fails the test; the request is then neither recorded nor
	// given a reply, but a 400 error through WriteError.
	Observe(r *http.Request, body []byte) (Observed, error)
	// WriteReply writes a successful reply to the request obs was decoded
	// from: a stream when obs.Stream is set, else one response.
	WriteReply(w http.ResponseWriter, obs Observed, reply Reply)
	// WriteError writes the vendor's error response for reply: status
	// reply.Status and a body carrying reply.ErrorMessage. The server has
	// already set the Retry-After header.
	WriteError(w http.ResponseWriter, reply Reply)
}

// NewServer starts an httptest server speaking v and returns a Target
// whose Script, Requests and Config.BaseURL are wired to it; the caller
// fills in Model, the rest of Config, Params and Reasoning. The server
// handles what is the same for every vendor: the reply queue, the record
// of requests, error replies with their Retry-After header (whole seconds,
// rounded up), failing the test on a request with an empty queue, and
// Reply.Hang, which it answers with a 200 status line and then nothing
// until the request's context ends. It is closed when the test ends,
// hanging requests first.
func NewServer(t testing.TB, v Vendor) Target {
	s := &server{t: t, v: v, stop: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(s.stop) }) // runs before srv.Close: releases hanging handlers
	tg := Target{Script: s.script, Requests: s.requests}
	tg.Config.BaseURL = srv.URL
	return tg
}

// server is the state behind NewServer's Target.
type server struct {
	t        testing.TB
	v        Vendor
	stop     chan struct{}
	mu       sync.Mutex
	queue    []Reply
	observed []Observed
}

func (s *server) script(replies ...Reply) {
	s.mu.Lock()
	s.queue = append(s.queue, replies...)
	s.mu.Unlock()
}

func (s *server) requests() []Observed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Observed(nil), s.observed...)
}

// next records obs and takes the next reply; ok is false when the queue
// is empty.
func (s *server) next(obs Observed) (rep Reply, n int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observed = append(s.observed, obs)
	n = len(s.observed)
	if len(s.queue) == 0 {
		return Reply{}, n, false
	}
	rep = s.queue[0]
	s.queue = s.queue[1:]
	return rep, n, true
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client is gone
	}
	obs, err := s.v.Observe(r, body)
	if err != nil {
		s.t.Errorf("llmtest: %s %s: %v", r.Method, r.URL.Path, err)
		s.v.WriteError(w, Reply{Status: http.StatusBadRequest, ErrorMessage: err.Error()})
		return
	}
	rep, n, ok := s.next(obs)
	switch {
	case !ok:
		s.t.Errorf("llmtest: request %d with no scripted reply", n)
		s.v.WriteError(w, Reply{Status: http.StatusInternalServerError, ErrorMessage: "no scripted reply"})
	case rep.Hang:
		// Accept with a 200 status line, so that cancelling meets the
		// provider reading the body, then stall.
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
	case rep.Status != 0:
		if rep.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(rep.RetryAfter.Seconds()))))
		}
		s.v.WriteError(w, rep)
	default:
		s.v.WriteReply(w, obs, rep)
	}
}
