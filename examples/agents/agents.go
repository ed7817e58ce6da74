// Package agents holds the example agent files (docs/agents.md). Its
// support and echo agents are what agentry serve serves when it is given
// no --agents directory.
package agents

import "embed"

// Defaults holds support.yaml and echo.yaml, the agents agentry serve
// serves without --agents.
//
//go:embed support.yaml echo.yaml
var Defaults embed.FS
