package bounded

import "testing"

func TestMapForgetsTheOldest(t *testing.T) {
	m := New[string, int](2)
	m.Add("a", 1)
	m.Add("b", 2)
	m.Add("a", 9) // there already: kept as it was
	m.Add("c", 3) // full: "a" goes
	if _, ok := m.Get("a"); ok {
		t.Error("the oldest entry was kept")
	}
	for k, want := range map[string]int{"b": 2, "c": 3} {
		if v, ok := m.Get(k); !ok || v != want {
			t.Errorf("Get(%s) = %d, %v; want %d", k, v, ok, want)
		}
	}
	if m.Len() != 2 {
		t.Errorf("Len = %d, want 2", m.Len())
	}
}
