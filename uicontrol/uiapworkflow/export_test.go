package uiapworkflow

// Unexported names the external tests use.

type Action = action
type State = state
