package workflow

// Unexported names the external tests use.
const MaxFileSize = maxFileSize
