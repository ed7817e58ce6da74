package uiapworkflow

// Unexported names the external tests use.
const ActionStateInput = actionStateInput

type Action = action
type State = state
