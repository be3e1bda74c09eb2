package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/hpa/metriclabel"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/watch"
	"github.com/setpointhq/setpoint/store"
)

// metrics are the service's own Prometheus metrics (the gRPC ones come
// from grpcprom). The server is shared by many clusters, so no metric has
// a per-target label: per-target series (desired replicas, each metric's
// proposal) are the agent's, which sees only its own cluster. docs/metrics.md
// lists them all.
type metrics struct {
	reconciliations   *prometheus.CounterVec
	reconcileDuration *prometheus.HistogramVec
	computations      *prometheus.CounterVec
	outcomes          *prometheus.CounterVec
	proposed          *prometheus.HistogramVec
	desired           *prometheus.HistogramVec
	steps             *prometheus.CounterVec
	observations      *prometheus.CounterVec
	watchStreams      prometheus.Gauge
	watchCutoffs      prometheus.Counter
	aheadOfClock      prometheus.Counter

	// The children of the vectors above that every decision counts, by
	// the indices of their label values in actionLabels, errorLabels,
	// typeLabels and outcomeLabels: each is looked up in its vector once
	// (the first time it is counted, so that only counted series are
	// exposed) instead of hashing its label values and taking the vector's
	// lock for every decision.
	reconciled  [len(actionLabels)][len(errorLabels)]atomic.Pointer[prometheus.Counter]
	tookByLabel [len(actionLabels)][len(errorLabels)]atomic.Pointer[prometheus.Observer]
	desiredBy   [len(actionLabels)]atomic.Pointer[prometheus.Observer]
	proposedBy  [len(typeLabels)]atomic.Pointer[prometheus.Observer]
	computedBy  [len(actionLabels)][len(errorLabels)][len(typeLabels)]atomic.Pointer[prometheus.Counter]
	outcomeBy   [len(typeLabels)][len(outcomeLabels)]atomic.Pointer[prometheus.Counter]
}

// The label values whose children metrics keeps (index finds them).
var (
	actionLabels  = [...]string{metriclabel.ActionScaleUp, metriclabel.ActionScaleDown, metriclabel.ActionNone}
	errorLabels   = [...]string{metriclabel.ErrorNone, metriclabel.ErrorSpec, metriclabel.ErrorInternal}
	typeLabels    = [...]string{string(engine.ResourceSource), string(engine.ContainerResourceSource), string(engine.PodsSource), string(engine.ObjectSource), string(engine.ExternalSource), "Unknown"}
	outcomeLabels = [...]string{string(engine.OutcomeScaled), string(engine.OutcomeWithinTolerance), string(engine.OutcomeRebalanced), string(engine.OutcomeRebalanceHeld), string(engine.OutcomeFromZero), string(engine.OutcomeFailed)}
)

// index returns the index of v in labels, -1 when absent.
func index(labels []string, v string) int {
	for i, l := range labels {
		if l == v {
			return i
		}
	}
	return -1
}

// child returns what *slot holds, or else lookup's result, kept in slot.
func child[T any](slot *atomic.Pointer[T], lookup func() T) T {
	if c := slot.Load(); c != nil {
		return *c
	}
	c := lookup()
	slot.Store(&c)
	return c
}

// counter returns vec's child for the label values, kept in slot when
// there is one (nil: a value without an index).
func counter(slot *atomic.Pointer[prometheus.Counter], vec *prometheus.CounterVec, values ...string) prometheus.Counter {
	if slot == nil {
		return vec.WithLabelValues(values...)
	}
	return child(slot, func() prometheus.Counter { return vec.WithLabelValues(values...) })
}

// observer is counter for a histogram vector.
func observer(slot *atomic.Pointer[prometheus.Observer], vec *prometheus.HistogramVec, values ...string) prometheus.Observer {
	if slot == nil {
		return vec.WithLabelValues(values...)
	}
	return child(slot, func() prometheus.Observer { return vec.WithLabelValues(values...) })
}

// replicaBuckets are the buckets of replica-count histograms.
var replicaBuckets = []float64{0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 1000}

// newMetrics creates the service's metrics and registers them with reg.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		reconciliations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "reconciliations_total",
			Help: "Decisions made (Recommend calls reaching the engine), by action (scale_up, scale_down, none) and error (none, spec, internal), as the HPA controller's reconciliations_total.",
		}, []string{"action", "error"}),
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "reconciliation_duration_seconds",
			Help:    "Time to decide and durably record one decision, by action and error, as the HPA controller's reconciliation_duration_seconds.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"action", "error"}),
		computations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "metric_computation_total",
			Help: "Metric computations of decisions, by action the metric proposed, error and metric_type, as the HPA controller's metric_computation_total.",
		}, []string{"action", "error", "metric_type"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "metric_outcomes_total",
			Help: "Metric computations by metric_type and outcome (Scaled, WithinTolerance, Rebalanced, RebalanceHeld, FromZero, Failed).",
		}, []string{"metric_type", "outcome"}),
		proposed: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "metric_proposed_replicas",
			Help:    "Replica count each metric proposed, by metric_type (failed metrics are not observed).",
			Buckets: replicaBuckets,
		}, []string{"metric_type"}),
		desired: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "desired_replicas",
			Help:    "Replica count of each decision, by action.",
			Buckets: replicaBuckets,
		}, []string{"action"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "decision_limits_total",
			Help: "Steps that moved a decision away from the metrics' proposal, by kind (Stabilized, Limited, CurrentAboveMax, CurrentBelowMin, MinFromZero, ScalingDisabled) and reason (ScaleUpStabilized, ScaleDownLimit, TooManyReplicas, ...): which limit held decisions back.",
		}, []string{"kind", "reason"}),
		observations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "observations_total",
			Help: "Observations recorded (Observe), by kind (Applied, Failed, External).",
		}, []string{"kind"}),
		watchStreams: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "watch_streams",
			Help: "Watch streams open.",
		}),
		watchCutoffs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "watch_cutoffs_total",
			Help: "Watch streams ended because they fell behind (their buffer was full).",
		}),
		aheadOfClock: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "decisions_ahead_of_clock_total",
			Help: "Decisions stamped more than a second after this server's clock: the target's last decision came from a server whose clock is ahead of this one's.",
		}),
	}
	reg.MustRegister(m.reconciliations, m.reconcileDuration, m.computations, m.outcomes, m.proposed, m.desired, m.steps, m.observations, m.watchStreams, m.watchCutoffs, m.aheadOfClock)
	for _, a := range []string{metriclabel.ActionScaleUp, metriclabel.ActionScaleDown, metriclabel.ActionNone} {
		m.reconciliations.WithLabelValues(a, metriclabel.ErrorNone)
	}
	return m
}

// decided records one Recommend call that reached the handler: d is the
// decision (nil when none was made), spec the resolved spec, err the
// call's error.
func (m *metrics) decided(d *engine.Decision, spec engine.Spec, err error, took time.Duration) {
	action, errLabel := metriclabel.ActionNone, metriclabel.ErrorNone
	switch {
	case err != nil && specError(err):
		errLabel = metriclabel.ErrorSpec
	case err != nil:
		errLabel = metriclabel.ErrorInternal
	case d != nil && d.Error != "":
		errLabel = metriclabel.ErrorInternal
	}
	if d != nil && err == nil {
		action = metriclabel.ActionOf(d.Rescale, d.DesiredReplicas, d.Explanation.CurrentReplicas)
		observer(&m.desiredBy[index(actionLabels[:], action)], m.desired, action).Observe(float64(d.DesiredReplicas))
		current := d.Explanation.CurrentReplicas
		for i, x := range d.Explanation.Metrics {
			typ := "Unknown"
			if i < len(spec.Metrics) {
				typ = string(spec.Metrics[i].Type)
			}
			mAction, mErr := metriclabel.ActionOf(true, x.Proposal, current), metriclabel.ErrorNone
			t, o := index(typeLabels[:], typ), index(outcomeLabels[:], string(x.Outcome))
			var proposed *atomic.Pointer[prometheus.Observer]
			var computed, outcome *atomic.Pointer[prometheus.Counter]
			if x.Outcome == engine.OutcomeFailed {
				mAction, mErr = metriclabel.ActionNone, metriclabel.ErrorInternal
			}
			if t >= 0 {
				proposed = &m.proposedBy[t]
				computed = &m.computedBy[index(actionLabels[:], mAction)][index(errorLabels[:], mErr)][t]
				if o >= 0 {
					outcome = &m.outcomeBy[t][o]
				}
			}
			if x.Outcome != engine.OutcomeFailed {
				observer(proposed, m.proposed, typ).Observe(float64(x.Proposal))
			}
			counter(computed, m.computations, mAction, mErr, typ).Inc()
			counter(outcome, m.outcomes, typ, string(x.Outcome)).Inc()
		}
		for _, s := range d.Explanation.Steps {
			m.steps.WithLabelValues(string(s.Kind), s.Reason).Inc()
		}
	}
	a, e := index(actionLabels[:], action), index(errorLabels[:], errLabel)
	counter(&m.reconciled[a][e], m.reconciliations, action, errLabel).Inc()
	observer(&m.tookByLabel[a][e], m.reconcileDuration, action, errLabel).Observe(took.Seconds())
}

// specError reports whether err is a fault of the request's spec.
func specError(err error) bool {
	var ve *setpointv1.ValidationError
	var fe *engine.FieldError
	return errors.As(err, &ve) || errors.As(err, &fe)
}

// targetCount keeps the number of targets in the store from its change
// feed: counted once (at the first scrape), then moved by each created and
// deleted target.
type targetCount struct {
	count func(ctx context.Context) (int, uint64, error)

	countMu sync.Mutex // serializes the first count

	mu       sync.Mutex
	counted  bool
	counting bool
	n        int
	pending  []store.Change // changes published while counting
}

// observe follows the feed (called by the hub with each commit's changes).
func (t *targetCount) observe(cs []store.Change) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case slices.ContainsFunc(cs, func(c store.Change) bool { return c.Kind == store.ChangeGap }):
		// Targets created or deleted in the gap are unknown: count again.
		t.counted = false
	case t.counted:
		t.n += delta(cs, 0)
	case t.counting:
		t.pending = append(t.pending, cs...)
	}
}

// delta is the change of the target count made by the changes after rev.
func delta(cs []store.Change, rev uint64) int {
	n := 0
	for _, c := range cs {
		switch {
		case c.Revision <= rev:
		case c.Created:
			n++
		case c.Kind == store.ChangeDeleted:
			n--
		}
	}
	return n
}

// countWait bounds how long a scrape waits to count the store's targets.
const countWait = time.Second

// value returns the count, counting the store the first time.
func (t *targetCount) value() float64 {
	t.countMu.Lock()
	defer t.countMu.Unlock()
	t.mu.Lock()
	if t.counted {
		defer t.mu.Unlock()
		return float64(t.n)
	}
	t.counting, t.pending = true, nil
	t.mu.Unlock()
	// A store that cannot catch up (a disk stalling its flushes) holds
	// the scrape at most this long; the count is then -1 until it can.
	ctx, cancel := context.WithTimeout(context.Background(), countWait)
	defer cancel()
	n, rev, err := t.count(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.counting = false
	if err != nil {
		t.pending = nil
		return -1
	}
	t.n, t.counted = n+delta(t.pending, rev), true
	t.pending = nil
	return float64(t.n)
}

// registerFeedMetrics registers the metrics kept from the store's change
// feed: the number of targets and the latest revision.
func registerFeedMetrics(reg prometheus.Registerer, h *watch.Hub, st store.Store) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "setpoint", Subsystem: "server", Name: "feed_revision",
		Help: "Revision of the latest change recorded (Watch resume points are revisions).",
	}, func() float64 { return float64(h.Revision()) }))
	t := &targetCount{count: st.Count}
	h.Observe(t.observe)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "setpoint", Subsystem: "server", Name: "autoscalers",
		Help: "Targets (autoscalers) the service keeps, across clusters, as the HPA controller's num_horizontal_pod_autoscalers; -1 when they could not be counted.",
	}, t.value))
}
