package discovery_test

import (
	"testing"

	"github.com/agentry-dev/agentry/messaging/discovery"
)

// TestHandlerNilOptions: the identity is required; nil options are
// refused, not dereferenced.
func TestHandlerNilOptions(t *testing.T) {
	if _, err := discovery.Handler(nil); err == nil {
		t.Error("Handler(nil) succeeded")
	}
}
