package uaipconformance

// Unexported names the external tests use.
type Result = result
