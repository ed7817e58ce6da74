package govern

import "fmt"

// Tier is a risk tier of UAICP §5.3, ordered from least to most strict.
type Tier int

// The three tiers. The zero value is not a tier: a tool that declares
// none is treated as unknown, that is WriteHighRisk.
const (
	ReadOnly Tier = iota + 1
	WriteLowRisk
	WriteHighRisk
)

var tierNames = map[Tier]string{ReadOnly: "read_only", WriteLowRisk: "write_low_risk", WriteHighRisk: "write_high_risk"}

// String returns the tier's wire name ("read_only", …), or "unknown".
func (t Tier) String() string {
	switch t {
	case ReadOnly:
		return "read_only"
	case WriteLowRisk:
		return "write_low_risk"
	case WriteHighRisk:
		return "write_high_risk"
	}
	return "unknown"
}

// Valid reports whether t is one of the three tiers.
func (t Tier) Valid() bool { return t >= ReadOnly && t <= WriteHighRisk }

// ParseTier parses a tier's wire name.
func ParseTier(s string) (Tier, error) {
	for t, n := range tierNames {
		if n == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("govern: unknown risk tier %q (want read_only, write_low_risk or write_high_risk)", s)
}

// MarshalText writes the wire name.
func (t Tier) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("govern: invalid risk tier %d", int(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText reads the wire name.
func (t *Tier) UnmarshalText(b []byte) error {
	v, err := ParseTier(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// strictest returns the strictest of tiers, ignoring invalid (unset) ones;
// with no valid tier it returns WriteHighRisk.
func strictest(tiers ...Tier) Tier {
	var m Tier
	for _, t := range tiers {
		if t.Valid() && t > m {
			m = t
		}
	}
	if m == 0 {
		return WriteHighRisk
	}
	return m
}

// effectiveTier is the tier a call runs under (DESIGN §5): the strictest of
// the tool's declared tier, the operator's pinned tier and the task class's
// floor, where a tool that declares no tier (an unknown tool) counts as
// WriteHighRisk. Pinning and floors can only make a call stricter.
func effectiveTier(declared, pinned, floor Tier) Tier {
	if !declared.Valid() {
		declared = WriteHighRisk
	}
	return strictest(declared, pinned, floor)
}
