package envelope

// Names the external tests (package envelope_test) use that are not part
// of the package's API.

const MaxCapTokenSize = maxCapTokenSize

var (
	ValidateEnvelope = validateEnvelope
	ValidateDelta    = validateDelta
	ValidateManifest = validateManifest
	NewID            = newID
	ScopeCovers      = scopeCovers
	ParseSignature   = parseCompactJWS
	OpenReplayFile   = openReplayFile
	Intents          = allIntents
)

func (e *Envelope) Canonical() ([]byte, error) { return e.canonical() }

func (c Code) Known() bool { return c.known() }
