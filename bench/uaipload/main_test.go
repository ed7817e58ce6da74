package main

import (
	"io"
	"strings"
	"testing"
)

func TestRefusesNonLoopbackTargets(t *testing.T) {
	for _, u := range []string{"http://10.0.0.1:8080", "http://example.com", "https://127.0.0.1:8443", "127.0.0.1:8080", "http://[2001:db8::1]:80"} {
		if err := checkLoopback(u); err == nil {
			t.Errorf("%s: accepted", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8080", "http://127.9.9.9:1", "http://[::1]:8080", "http://localhost:8080/"} {
		if err := checkLoopback(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestBounds(t *testing.T) {
	for _, args := range [][]string{
		{"-url", "http://192.168.1.1:80"},
		{"-duration", "2m"},
		{"-max-requests", "10000000"},
		{"-sessions", "1000000"},
		{"-rounds", "11"},
		{"-c", "0"},
		{"-c", "1000"},
		{"-rss-sessions", "10"},
	} {
		if err := run(args, io.Discard); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

func TestTaskBodiesStayWithinStock(t *testing.T) {
	c := &config{workflow: "store"}
	bodies := c.taskBodies("add_to_cart")
	if len(bodies) != perSession || perSession != 191 {
		t.Fatalf("%d bodies, %d per session", len(bodies), perSession)
	}
	counts := map[string]int{}
	for _, b := range bodies {
		for _, s := range stock {
			if strings.Contains(string(b), s.id) {
				counts[s.id]++
			}
		}
	}
	for _, s := range stock {
		if counts[s.id] != s.n {
			t.Errorf("%s: %d adds for a stock of %d", s.id, counts[s.id], s.n)
		}
	}
}

func TestThousands(t *testing.T) {
	for f, want := range map[float64]string{0: "0", 999.4: "999", 1000: "1,000", 1234567.8: "1,234,568"} {
		if got := thousands(f); got != want {
			t.Errorf("thousands(%v) = %q, want %q", f, got, want)
		}
	}
}
