package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/setpointhq/setpoint/store/boltstore"
)

// boltMetrics are the bbolt store's group commit, checkpoints, file and record cache,
// served with the server's own on /metrics: histograms observed at each
// commit (boltstore.Options.ObserveCommit), the rest read from boltstore.Stats at
// each scrape.
type boltMetrics struct {
	// st is the store, set once it is open (before anything scrapes).
	st *boltstore.Store

	commitDuration, held, batchWrites prometheus.Histogram

	commits, writes, fileBytes, checkpoints, checkpointSeconds, syncAge *prometheus.Desc
}

func newBoltMetrics() *boltMetrics {
	return &boltMetrics{
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "setpoint_bolt_commit_duration_seconds",
			Help:    "Time of each commit that answers writes (a journal frame's write and flush; a deletion's bbolt transaction), shared by the writes it carries.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		held: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "setpoint_bolt_batch_held_seconds",
			Help:    "Time the committer held each batch open for more writes before committing it (bounded by the store's batch delay).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 12),
		}),
		batchWrites: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "setpoint_bolt_batch_writes",
			Help:    "Writes (decisions, observations, deletions, expiries) carried by each commit: the group commit's batch size.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		commits:           prometheus.NewDesc("setpoint_bolt_commits_total", "Commits that made writes durable and answered them (journal frames, deletions' bbolt transactions), each one flush.", nil, nil),
		writes:            prometheus.NewDesc("setpoint_bolt_writes_total", "Writes the committer applied, committed or failed.", nil, nil),
		fileBytes:         prometheus.NewDesc("setpoint_bolt_file_bytes", "Size of the bbolt file.", nil, nil),
		checkpoints:       prometheus.NewDesc("setpoint_bolt_checkpoints_total", "bbolt transactions that wrote journaled writes into the file, behind their answers.", nil, nil),
		checkpointSeconds: prometheus.NewDesc("setpoint_bolt_checkpoint_seconds_total", "Time spent in those transactions (applying the writes, page writes, fsyncs).", nil, nil),
		syncAge:           prometheus.NewDesc("setpoint_bolt_sync_in_progress_seconds", "Age of the oldest write to disk still in progress (a commit's journal flush or bbolt transaction, a checkpoint), 0 when none: it grows while a disk stalls its fsyncs, which the commit histogram sees only when they end.", nil, nil),
	}
}

// observe records one commit; the committer calls it.
func (m *boltMetrics) observe(c boltstore.Commit) {
	m.commitDuration.Observe(c.Duration.Seconds())
	m.held.Observe(c.Held.Seconds())
	m.batchWrites.Observe(float64(c.Writes))
}

// Describe implements prometheus.Collector.
func (m *boltMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.commitDuration.Describe(ch)
	m.held.Describe(ch)
	m.batchWrites.Describe(ch)
	for _, d := range []*prometheus.Desc{m.commits, m.writes, m.fileBytes, m.checkpoints, m.checkpointSeconds, m.syncAge} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *boltMetrics) Collect(ch chan<- prometheus.Metric) {
	m.commitDuration.Collect(ch)
	m.held.Collect(ch)
	m.batchWrites.Collect(ch)
	if m.st == nil {
		return
	}
	s := m.st.Stats()
	ch <- prometheus.MustNewConstMetric(m.commits, prometheus.CounterValue, float64(s.Commits))
	ch <- prometheus.MustNewConstMetric(m.writes, prometheus.CounterValue, float64(s.Writes))
	ch <- prometheus.MustNewConstMetric(m.fileBytes, prometheus.GaugeValue, float64(s.FileBytes))
	ch <- prometheus.MustNewConstMetric(m.checkpoints, prometheus.CounterValue, float64(s.Checkpoints))
	ch <- prometheus.MustNewConstMetric(m.checkpointSeconds, prometheus.CounterValue, s.CheckpointTime.Seconds())
	ch <- prometheus.MustNewConstMetric(m.syncAge, prometheus.GaugeValue, m.st.SyncAge().Seconds())
}
