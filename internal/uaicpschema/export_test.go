package uaicpschema

// Unexported names the external tests use.
const EnvelopeFile = envelopeFile
const EvidenceFile = evidenceFile
const ReportFile = reportFile
