package workflow

import "github.com/agentry-dev/agentry/internal/yamldoc"

// Unexported names the external tests use.
const MaxFileSize = yamldoc.MaxFileSize

// WorkflowSchema is the schema Load validates against.
func WorkflowSchema() []byte { return workflowSchemaJSON }
