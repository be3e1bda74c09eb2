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
// Both encode what they store with package store/record, so a record's
// bytes are the same in either.
//
// # Writing: read, decide, compare
//
// A write is one Update: load the target's record (a target.Record), run
// the caller's function — a transition of package target — on it, and
// store the result if the record is still the one the function was given
// (a per-target revision check); otherwise run the function again on the
// new record. The store knows what a record holds, not how it changes. A
// decision is one Decide, an Update whose function replaces the last
// decision and reads of the previous one only its ID and At, so a backend
// may leave the rest of it undecoded:
//
//	rec, err := st.Decide(ctx, key, func(rec *target.Record) error {
//		return target.Decide(rec, in, id, now) // an error: nothing is stored
//	})
//
// Update and Decide return only after the write is durable, so an answer
// built from rec describes durable state. The function must depend only
// on its argument and must not keep it: it may run more than once, and the
// record it receives is its own copy. If it returns an error, nothing is
// stored and the error is returned; it runs in the caller's goroutine, so
// a panic is the caller's. A cancelled write may still be stored (see
// Store.Update); Get says what is.
//
// # Reading, corrupt records, bounds
//
// Get reads one record; List walks keys in order — cluster, namespace,
// name, each compared as bytes — optionally within a cluster or a
// namespace of a cluster, in pages (DefaultPageSize, at most MaxPageSize)
// with an opaque next-page token. A value that does not decode is an error
// for that target only (a *CorruptError, errors.Is ErrCorrupt); List
// returns the rest of the page with an error joining one *CorruptError per
// skipped record; Delete removes a corrupt record. Update keeps the newest
// DefaultMaxEvents events and caps each history list at DefaultMaxHistory
// entries (the engine bounds history by its windows; the store never trims
// it by time). Expire(cutoff) removes the targets last seen before cutoff;
// the server calls it periodically.
//
// # The change feed and the decision log
//
// Every write that records something — a decision, an observed event, a
// deletion — records a Change, numbered by a revision that only grows, in
// the same transaction (Feed). Changes reads from a revision on; Follow
// hands each commit's changes to a callback before the commit's writers
// are answered, which is how the server's Watch streams them. Count gives
// the number of records exact as of a revision. Each decision also enters
// its target's decision log (Decisions), kept for a retention
// (DefaultDecisionRetention).
//
// # Moving data
//
// Copy moves records between stores (bbolt to etcd and back, or clusters
// between shards) and verifies them; DeleteClusters ends a move. Backup
// writes a snapshot that boltstore.Open accepts as it is.
package store
