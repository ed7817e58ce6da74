package envelope

// Unexported names the external tests use.
const MaxCapTokenSize = maxCapTokenSize
