package server

import "time"

// ConsoleCookie returns a console session cookie value of s valid until
// exp (in the past: an expired one).
func ConsoleCookie(s *Server, exp time.Time) string { return s.console.issue(exp) }

// SetConsoleClock makes s's console sessions and login limit read the time
// from now.
func SetConsoleClock(s *Server, now func() time.Time) { s.console.now = now }
