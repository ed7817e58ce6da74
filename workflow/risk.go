package workflow

import "fmt"

// The risk tiers a task may declare (Task.Risk, TaskInfo.RiskTier): UAICP
// 0.3 §5.3 (UAICP/uaicp repository) names them; a governed agent gates a
// task's calls by its tier. They are UAICP's wire names, kept here so
// that this package needs no governance runtime.
const (
	RiskReadOnly  = "read_only"
	RiskWriteLow  = "write_low_risk"
	RiskWriteHigh = "write_high_risk"
)

// checkRisk accepts a task's declared tier: one of the three, or empty
// (undeclared).
func checkRisk(tier string) error {
	switch tier {
	case "", RiskReadOnly, RiskWriteLow, RiskWriteHigh:
		return nil
	}
	return fmt.Errorf("unknown risk tier %q (want %s, %s or %s)", tier, RiskReadOnly, RiskWriteLow, RiskWriteHigh)
}
