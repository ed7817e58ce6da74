// Package bounded is a map that keeps at most a fixed number of entries,
// forgetting the oldest first: for what a server remembers about recent
// things (runs that ended, their answers, runs that lost records)
// without holding state that grows without end.
package bounded

// Map maps keys to values, keeping the max most recently added. The
// zero value is not usable: make one with New. It is not safe for
// concurrent use.
type Map[K comparable, V any] struct {
	max   int
	m     map[K]V
	order []K // oldest first
}

// New returns a Map keeping at most max entries (max ≥ 1).
func New[K comparable, V any](max int) *Map[K, V] {
	return &Map[K, V]{max: max, m: map[K]V{}}
}

// Get returns the value of k.
func (b *Map[K, V]) Get(k K) (V, bool) {
	v, ok := b.m[k]
	return v, ok
}

// Len returns the number of entries.
func (b *Map[K, V]) Len() int { return len(b.m) }

// Add adds k with v unless k is there already (its value stays), and
// forgets the oldest entry when the map is full.
func (b *Map[K, V]) Add(k K, v V) {
	if _, ok := b.m[k]; ok {
		return
	}
	if len(b.order) >= b.max {
		delete(b.m, b.order[0])
		b.order = b.order[1:]
	}
	b.m[k] = v
	b.order = append(b.order, k)
}
