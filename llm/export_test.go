package llm

// Names the external tests use for unexported identifiers.

const DefaultMaxIterations = defaultMaxIterations

var ParsePartialJSON = parsePartialJSON
var RoundFrom = roundFrom

type TokenBucket = tokenBucket

var DecodeObject = decodeObject
