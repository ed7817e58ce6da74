// Package metrics keeps counters, gauges and histograms and writes them in
// the Prometheus text exposition format (version 0.0.4), for /metrics. It
// is a small, dependency-free subset: labelled series created on first
// use, safe for concurrent use.
package metrics

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry holds metric families.
type Registry struct {
	mu       sync.Mutex
	families []family
}

type family interface {
	write(w io.Writer)
	name() string
}

// WriteTo writes every family in the text format.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	fams := append([]family(nil), r.families...)
	r.mu.Unlock()
	sort.Slice(fams, func(i, j int) bool { return fams[i].name() < fams[j].name() })
	cw := &countWriter{w: w}
	for _, f := range fams {
		f.write(cw)
	}
	return cw.n, cw.err
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (r *Registry) add(f family) {
	r.mu.Lock()
	r.families = append(r.families, f)
	r.mu.Unlock()
}

// series holds one family's labelled series.
type series[T any] struct {
	mu     sync.RWMutex
	labels []string
	byKey  map[string]*T
	keys   map[string][]string
	newT   func() *T
}

func (s *series[T]) with(values ...string) *T {
	if len(values) != len(s.labels) {
		panic(fmt.Sprintf("metrics: %d label values for %d labels", len(values), len(s.labels)))
	}
	key := strings.Join(values, "\xff")
	s.mu.RLock()
	t := s.byKey[key]
	s.mu.RUnlock()
	if t != nil {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t = s.byKey[key]; t == nil {
		t = s.newT()
		s.byKey[key] = t
		s.keys[key] = append([]string(nil), values...)
	}
	return t
}

func (s *series[T]) each(fn func(values []string, t *T)) {
	s.mu.RLock()
	keys := make([]string, 0, len(s.byKey))
	for k := range s.byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := make([][]string, len(keys))
	ts := make([]*T, len(keys))
	for i, k := range keys {
		vals[i], ts[i] = s.keys[k], s.byKey[k]
	}
	s.mu.RUnlock()
	for i := range keys {
		fn(vals[i], ts[i])
	}
}

func formatLabels(names, values []string, extraName, extraValue string) string {
	if len(names) == 0 && extraName == "" {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteString(`="`)
		b.WriteString(escape(values[i]))
		b.WriteByte('"')
	}
	if extraName != "" {
		if len(names) > 0 {
			b.WriteByte(',')
		}
		b.WriteString(extraName + `="` + extraValue + `"`)
	}
	b.WriteByte('}')
	return b.String()
}

func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

func header(w io.Writer, name, help, typ string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, strings.ReplaceAll(help, "\n", " "), name, typ)
}

// CounterVec is a family of counters.
type CounterVec struct {
	n, help string
	s       series[atomic.Uint64]
}

// NewCounterVec registers a counter family.
func (r *Registry) NewCounterVec(name, help string, labels ...string) *CounterVec {
	c := &CounterVec{n: name, help: help, s: series[atomic.Uint64]{labels: labels, byKey: map[string]*atomic.Uint64{},
		keys: map[string][]string{}, newT: func() *atomic.Uint64 { return new(atomic.Uint64) }}}
	r.add(c)
	return c
}

// Inc adds one to the series with these label values.
func (c *CounterVec) Inc(values ...string) { c.s.with(values...).Add(1) }

// With returns the series with these label values, for callers that
// update it often (no lookup per update).
func (c *CounterVec) With(values ...string) *atomic.Uint64 { return c.s.with(values...) }

// Add adds n.
func (c *CounterVec) Add(n uint64, values ...string) { c.s.with(values...).Add(n) }

func (c *CounterVec) name() string { return c.n }

func (c *CounterVec) write(w io.Writer) {
	header(w, c.n, c.help, "counter")
	c.s.each(func(values []string, v *atomic.Uint64) {
		fmt.Fprintf(w, "%s%s %d\n", c.n, formatLabels(c.s.labels, values, "", ""), v.Load())
	})
}

// GaugeFunc reports a value computed at scrape time.
type GaugeFunc struct {
	n, help string
	fn      func() float64
}

// NewGaugeFunc registers a gauge read from fn when scraped.
func (r *Registry) NewGaugeFunc(name, help string, fn func() float64) *GaugeFunc {
	g := &GaugeFunc{name, help, fn}
	r.add(g)
	return g
}

func (g *GaugeFunc) name() string { return g.n }

func (g *GaugeFunc) write(w io.Writer) {
	header(w, g.n, g.help, "gauge")
	fmt.Fprintf(w, "%s %s\n", g.n, formatFloat(g.fn()))
}

// HistogramVec is a family of histograms with fixed buckets.
type HistogramVec struct {
	n, help string
	buckets []float64
	s       series[histogram]
}

type histogram struct {
	counts []atomic.Uint64 // one per bucket, then +Inf
	sum    atomic.Uint64   // float64 bits
	count  atomic.Uint64
}

// DefaultBuckets are latency buckets in seconds, 0.5 ms to 10 s.
var DefaultBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// NewHistogramVec registers a histogram family; nil buckets means
// DefaultBuckets.
func (r *Registry) NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	if buckets == nil {
		buckets = DefaultBuckets
	}
	h := &HistogramVec{n: name, help: help, buckets: buckets}
	h.s = series[histogram]{labels: labels, byKey: map[string]*histogram{}, keys: map[string][]string{},
		newT: func() *histogram { return &histogram{counts: make([]atomic.Uint64, len(buckets)+1)} }}
	r.add(h)
	return h
}

// Observe records v in the series with these label values.
func (h *HistogramVec) Observe(v float64, values ...string) { h.With(values...).Observe(v) }

// Histogram is one series of a HistogramVec.
type Histogram struct {
	h *histogram
	b []float64
}

// With returns the series with these label values, for callers that
// update it often.
func (h *HistogramVec) With(values ...string) Histogram {
	return Histogram{h.s.with(values...), h.buckets}
}

// Observe records v.
func (hs Histogram) Observe(v float64) {
	x := hs.h
	i := sort.SearchFloat64s(hs.b, v)
	x.counts[i].Add(1)
	x.count.Add(1)
	for {
		old := x.sum.Load()
		if x.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
}

func (h *HistogramVec) name() string { return h.n }

func (h *HistogramVec) write(w io.Writer) {
	header(w, h.n, h.help, "histogram")
	h.s.each(func(values []string, x *histogram) {
		names := h.s.labels
		l := formatLabels(names, values, "", "")
		var cum uint64
		for i, b := range h.buckets {
			cum += x.counts[i].Load()
			fmt.Fprintf(w, "%s_bucket%s %d\n", h.n, formatLabels(names, values, "le", formatFloat(b)), cum)
		}
		cum += x.counts[len(h.buckets)].Load()
		fmt.Fprintf(w, "%s_bucket%s %d\n", h.n, formatLabels(names, values, "le", "+Inf"), cum)
		fmt.Fprintf(w, "%s_sum%s %s\n", h.n, l, formatFloat(math.Float64frombits(x.sum.Load())))
		fmt.Fprintf(w, "%s_count%s %d\n", h.n, l, x.count.Load())
	})
}

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
