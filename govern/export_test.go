package govern

// Unexported names the external tests use.
const DefaultMaxRepairs = defaultMaxRepairs
const MaxObjectSize = maxObjectSize
const MaxTokenSize = maxTokenSize
const MetaApprovalID = metaApprovalID
const MetaCallID = metaCallID
const MetaContent = metaContent
const MetaDeclaredTier = metaDeclaredTier
const MetaPolicyRule = metaPolicyRule
const MetaRepairs = metaRepairs
const MetaReportIDs = metaReportIDs
const MetaRiskTier = metaRiskTier
const MetaUnverified = metaUnverified
const NeedsReview = needsReview
const PolicyBlocked = policyBlocked
const Review = review
const RollbackRequired = rollbackRequired

type ChildData = childData
type RollbackData = rollbackData

var HashJSON = hashJSON
var NewVerifier = newVerifier
var ParseRulePolicy = parseRulePolicy
