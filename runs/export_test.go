package runs

// Subscribers returns how many subscriptions follow run id.
func Subscribers(s *Service, id string) int {
	s.mu.Lock()
	h := s.hubs[id]
	s.mu.Unlock()
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Unexported names the external tests use.
const MaxListLimit = maxListLimit
