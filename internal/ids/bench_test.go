package ids

import (
	"testing"

	"github.com/google/uuid"
)

// BenchmarkNew compares New with the google/uuid call it replaced.
func BenchmarkNew(b *testing.B) {
	b.Run("ids", func(b *testing.B) {
		for range b.N {
			New()
		}
	})
	b.Run("uuid", func(b *testing.B) {
		for range b.N {
			uuid.NewString()
		}
	})
}
