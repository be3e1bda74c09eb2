// Package store is the contract of Setpoint's persistence: what it
// remembers of each autoscaler target — its engine history, last spec,
// status, decision and observed events — durably, so that decisions
// survive restarts exactly as if the Kubernetes controller had kept its
// in-memory state.
//
// Store is the interface the server codes against. Two backends implement
// it and pass the same contract tests (package store/storetest):
// store/boltstore, one bbolt file on the server's disk, and
// store/etcdstore, records in an etcd cluster shared by several servers.
// Both encode records with package store/record, so a record's bytes are
// the same in either.
//
// # Writing: read, decide, compare
//
// A write is one Update: the store gives the caller's function — a
// transition of package target — a copy of the target's record, and stores
// what the function leaves if the record is still the one it was given;
// otherwise it runs the function again on the new record. The store knows
// what a record holds, not how it changes. A decision is one Decide, an
// Update whose function replaces the last decision:
//
//	rec, err := st.Decide(ctx, key, func(rec *target.Record) error {
//		return target.Decide(rec, in, id, now) // an error: nothing is stored
//	})
//
// Both return once the write is durable, so an answer built from rec
// describes durable state.
//
// # Reading, corrupt records, bounds
//
// Get reads one record; List walks keys in order — cluster, namespace,
// name, each compared as bytes — optionally within a cluster or a
// namespace of a cluster, in pages with an opaque next-page token. A value
// that does not decode is an error for that target only (a *CorruptError,
// errors.Is ErrCorrupt), and Delete removes it. A record keeps its newest
// events and history entries up to a bound (DefaultMaxEvents,
// DefaultMaxHistory); the engine bounds history by its windows, the store
// never trims it by time. Expire removes the targets not seen since a
// cutoff.
//
// # The change feed and the decision log
//
// Every write that records a decision, an observed event or a deletion
// also records a Change in the same transaction, numbered by a revision
// that only grows (Feed); the server's Watch reads and follows it, and
// Count is exact as of a revision. Each decision also enters its target's
// decision log (Decisions), kept for a retention (DefaultDecisionRetention).
//
// # Moving data
//
// Copy moves records between stores (bbolt to etcd and back, or clusters
// between shards) and verifies them; DeleteClusters ends a move. Backup
// writes a snapshot that boltstore.Open accepts as it is.
package store
