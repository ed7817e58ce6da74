package llm

// Unexported names the external tests use.
const DefaultMaxIterations = defaultMaxIterations
