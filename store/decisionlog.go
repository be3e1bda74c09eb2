package store

import "time"

// Defaults of the decision log.
const (
	// DefaultDecisionRetention is how long a decision stays in its target's
	// log by default: 720 decisions at a 15 s sync.
	DefaultDecisionRetention = 3 * time.Hour
	// DefaultDecisionsPageSize is the page size of a Decisions call whose
	// DecisionQuery.PageSize is 0.
	DefaultDecisionsPageSize = 500
	// MaxDecisionsPageSize is the largest page Decisions returns.
	MaxDecisionsPageSize = 5000
)

// DecisionQuery selects part of one target's decision log.
type DecisionQuery struct {
	// From, when set, keeps decisions made at or after it.
	From time.Time
	// To, when set, keeps decisions made before it.
	To time.Time
	// PageSize is the most decisions returned; 0 means
	// DefaultDecisionsPageSize, more than MaxDecisionsPageSize is lowered.
	PageSize int
	// PageToken continues a previous Decisions call of the same query.
	PageToken string
}
