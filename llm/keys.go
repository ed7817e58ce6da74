package llm

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
)

// KeyStrategy supplies an API key for each request (UPP-1.3 §4.2).
// Implementations are called concurrently. None of the strategies here ever
// prints a key: their String, GoString and LogValue methods redact it.
type KeyStrategy interface {
	Key(ctx context.Context) (string, error)
}

const redacted = "[REDACTED]"

// StaticKey is a single fixed key.
type StaticKey string

// Key returns the key.
func (k StaticKey) Key(context.Context) (string, error) { return string(k), nil }

// String redacts the key.
func (StaticKey) String() string { return redacted }

// GoString redacts the key.
func (StaticKey) GoString() string { return redacted }

// LogValue redacts the key.
func (StaticKey) LogValue() slog.Value { return slog.StringValue(redacted) }

// KeyFunc computes a key per request (UPP's DynamicKey and function keys).
type KeyFunc func(ctx context.Context) (string, error)

// Key calls f.
func (f KeyFunc) Key(ctx context.Context) (string, error) { return f(ctx) }

type roundRobinKeys struct {
	keys []string
	next atomic.Uint64
}

// NewRoundRobinKeys returns a strategy cycling through keys in order.
func NewRoundRobinKeys(keys ...string) KeyStrategy {
	return &roundRobinKeys{keys: append([]string(nil), keys...)}
}

// Key returns the next key.
func (r *roundRobinKeys) Key(context.Context) (string, error) {
	if len(r.keys) == 0 {
		return "", errors.New("no keys configured")
	}
	i := r.next.Add(1) - 1
	return r.keys[i%uint64(len(r.keys))], nil
}

// String redacts the keys.
func (r *roundRobinKeys) String() string { return redacted }

// GoString redacts the keys.
func (r *roundRobinKeys) GoString() string { return redacted }

// LogValue redacts the keys.
func (r *roundRobinKeys) LogValue() slog.Value { return slog.StringValue(redacted) }

// WeightedKey is one entry of NewWeightedKeys.
type WeightedKey struct {
	Key    string
	Weight float64
}

// NewWeightedKeys returns a strategy picking a key at random in proportion
// to its weight; entries without a positive weight are never picked.
func NewWeightedKeys(keys ...WeightedKey) KeyStrategy {
	return weightedKeys(append([]WeightedKey(nil), keys...))
}

// weightedKeys is the strategy NewWeightedKeys returns.
type weightedKeys []WeightedKey

// Key returns a random key.
func (w weightedKeys) Key(context.Context) (string, error) {
	var total float64
	for _, e := range w {
		if e.Weight > 0 {
			total += e.Weight
		}
	}
	if total <= 0 {
		return "", errors.New("no keys with positive weight configured")
	}
	x := rand.Float64() * total
	for _, e := range w {
		if e.Weight <= 0 {
			continue
		}
		if x < e.Weight {
			return e.Key, nil
		}
		x -= e.Weight
	}
	for i := len(w) - 1; i >= 0; i-- { // rounding: last positive entry
		if w[i].Weight > 0 {
			return w[i].Key, nil
		}
	}
	return "", errors.New("no keys configured")
}

// String redacts the keys.
func (weightedKeys) String() string { return redacted }

// GoString redacts the keys.
func (weightedKeys) GoString() string { return redacted }

// LogValue redacts the keys.
func (weightedKeys) LogValue() slog.Value { return slog.StringValue(redacted) }
