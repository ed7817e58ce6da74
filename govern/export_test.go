package govern

// Unexported names the external tests use.
const DefaultMaxRepairs = defaultMaxRepairs
const MaxObjectSize = maxObjectSize
const MaxTokenSize = maxTokenSize

type ChildData = childData
type RollbackData = rollbackData

var HashJSON = hashJSON
