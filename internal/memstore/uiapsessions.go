package memstore

import "github.com/agentry-dev/agentry/internal/uiapsession"

// UIAPSessions returns the store's uiapsession.Store: the app-side UIAP
// sessions (UIAP Core 0.1 at uiap.dev, §8.2) of the uicontrol.Apps given
// it, in memory (uiapsession.NewMemory), the same one on every call.
func (s *Store) UIAPSessions() uiapsession.Store {
	s.uiapOnce.Do(func() { s.uiap = uiapsession.NewMemory() })
	return s.uiap
}
