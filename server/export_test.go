package server

import "time"

// ConsoleCookie returns a console session cookie value of s valid until
// exp (in the past: an expired one).
func ConsoleCookie(s *Server, exp time.Time) string { return s.console.issue(exp) }
