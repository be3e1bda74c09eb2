package differential

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
)

// differenceCase is one side-by-side case.
type differenceCase struct {
	name string
	// replicas is each target's replica count at the start.
	replicas int32
	// targets are the Deployments; nil means one, "app" with app=<name>.
	targets []target
	// autoscalers are the specs, one autoscaler each, named after their
	// index ("app", "app-2", ...); the first watches "app".
	autoscalers []autoscalingv2.HorizontalPodAutoscalerSpec
	// sides are the twins the case runs, kube first; nil means allSides.
	sides []side
	// mixed makes the native twin's autoscalers after the first
	// Autoscalers rather than HPAs, its agent serving both kinds: in
	// native mode an HPA and an Autoscaler must see each other as two
	// HPAs do.
	mixed bool
	// steps is the timeline.
	steps []step
	// expect, when set, checks the reference's final state of the first
	// autoscaler: that the case exercised what it is there for.
	expect func(observed) error
}

// step is one point of a case's timeline.
type step struct {
	what string
	load load
	// scale sets the replica count of "app" by hand first (0 leaves it).
	scale int32
	// lasts, when set, is how long the step's load lasts: a blip shorter
	// than a stabilization window. Such a step is not settled; the next
	// step's comparison covers it.
	lasts time.Duration
	// held says the step ends rate-limited for good (a Disabled policy):
	// settle does not wait for that limit to lift.
	held bool
}

// autoscalerName is the name of a case's i-th autoscaler.
func autoscalerName(i int) string {
	if i == 0 {
		return "app"
	}
	return fmt.Sprintf("app-%d", i+1)
}

// kinds are the kinds of the case's autoscalers in the twin of side s.
func (c differenceCase) kinds(s side) []kind {
	kinds := make([]kind, len(c.autoscalers))
	for i := range kinds {
		switch {
		case s == setpoint, s == native && c.mixed && i > 0:
			kinds[i] = autoscalerKind
		default:
			kinds[i] = hpaKind
		}
	}
	return kinds
}

// attempts is how many times a case runs before a difference fails it.
//
// Pods appear to an autoscaler one at a time: play labels a step's new pods
// one by one (a pod cannot be created with its status, see playPod), and a
// side whose sync falls between two of those writes decides on part of the
// new pods — kube-controller-manager, for one, multiplies the ratio of the
// pods it sees by their count. Which side syncs in that window of a few
// milliseconds is chance, and a side that does takes one rescale the others
// do not. So a case that differs runs once more, from the start, in new
// namespaces; a real difference differs again.
const attempts = 2

// run runs the case on its twins and compares them with the reference
// after each step, again when they differ (attempts).
func (c differenceCase) run(t *testing.T, addr string) {
	t.Parallel()
	for try := 1; ; try++ {
		diff := c.attempt(t, addr, try)
		if diff == "" {
			return
		}
		if try == attempts {
			t.Fatal(diff)
		}
		t.Logf("attempt %d of %d differed; running the case again in new namespaces: %s", try, attempts, diff)
	}
}

// attempt runs the case once, the try-th time, on new twins, and returns
// the first difference from the reference, or "". The twins of an attempt
// that differed stop playing, their agents stop, and they lose their
// autoscalers.
func (c differenceCase) attempt(t *testing.T, addr string, try int) string {
	targets := c.targets
	if targets == nil {
		targets = []target{{name: "app", labels: map[string]string{"app": c.name}}}
	}
	sides := c.sides
	if sides == nil {
		sides = allSides
	}
	var twins []*twin
	var agents []func() // stops this attempt's agents
	for _, s := range sides {
		ns := c.name + "-" + s.suffix()
		if try > 1 {
			ns = fmt.Sprintf("%s-%d-%s", c.name, try, s.suffix())
		}
		twins = append(twins, newTwin(t, s, ns, targets, c.kinds(s), c.replicas))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	abandon := func(diff string) string {
		cancel()
		wg.Wait()
		for _, stop := range agents {
			stop()
		}
		for _, w := range twins {
			w.removeAutoscalers()
		}
		return diff
	}
	for _, w := range twins {
		w.set(c.steps[0].load)
		// The first pods and their metrics exist before the autoscalers,
		// so that no side starts by reading a half-built twin.
		for i, tg := range w.targets {
			d, err := w.kube.AppsV1().Deployments(w.ns).Get(t.Context(), tg.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				w.record(d)
			}
			if err := w.playTarget(t.Context(), tg, d); err != nil {
				t.Fatal(err)
			}
		}
		wg.Go(func() { w.play(ctx) })
		switch {
		case w.side == setpoint:
			agents = append(agents, startAgent(t, w.side.cluster(), w.ns, addr, agent.ServeAutoscalers))
		case w.side == native && c.mixed:
			agents = append(agents, startAgent(t, w.side.cluster(), w.ns, addr, agent.ServeBoth))
		case w.side == native:
			agents = append(agents, startAgent(t, w.side.cluster(), w.ns, addr, agent.ServeHPAs))
		}
	}
	for i, spec := range c.autoscalers {
		for _, w := range twins {
			if err := w.create(i, spec); err != nil {
				t.Fatalf("%s: %v", w.ns, err)
			}
		}
		// Which of several autoscalers syncs first is up to timing; each
		// is seen by every side before the next exists.
		if len(c.autoscalers) > 1 {
			for _, w := range twins {
				w.waitSynced(i, spec.ScaleTargetRef.Name)
			}
		}
	}
	for i, s := range c.steps {
		if i > 0 {
			for _, w := range twins {
				w.set(s.load)
			}
		}
		if s.scale > 0 {
			for _, w := range twins {
				w.scaleByHand(s.scale)
			}
		}
		if s.lasts > 0 {
			time.Sleep(s.lasts)
			continue
		}
		if diff := c.settle(t, twins, s); diff != "" {
			return abandon(diff)
		}
	}
	ref := twins[0].sequence()
	for _, w := range twins[1:] {
		if got := w.sequence(); !slices.Equal(ref, got) {
			return abandon(fmt.Sprintf("replica sequences differ:\n  %s: %v\n  %s: %v", twins[0].side, ref, w.side, got))
		}
	}
	t.Logf("replica sequence %v", ref)
	if c.expect != nil {
		o, err := twins[0].observe(t.Context(), 0, c.autoscalers[0].ScaleTargetRef.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.expect(o); err != nil {
			t.Errorf("%s: the case did not exercise what it is for: %v", twins[0].side, err)
		}
	}
	for _, w := range twins[1:] {
		w.checkWrites(len(w.sequence()) > 1)
	}
	return ""
}

// removeAutoscalers deletes the twin's autoscalers, so that nothing scales
// its targets any more.
func (w *twin) removeAutoscalers() {
	ctx := w.t.Context()
	for i, k := range w.kinds {
		var err error
		if k == hpaKind {
			err = w.kube.AutoscalingV2().HorizontalPodAutoscalers(w.ns).Delete(ctx, autoscalerName(i), metav1.DeleteOptions{})
		} else {
			err = w.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(w.ns).Delete(ctx, autoscalerName(i), metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			w.t.Errorf("%s: remove %s: %v", w.ns, autoscalerName(i), err)
		}
	}
}

// checkWrites checks what the agent's writes carry: its field manager on
// the autoscalers' status and, when it rescaled, the target's scale; and on
// an HPA it serves, the annotation with its decision (unless it refused
// every decision as AmbiguousSelector).
func (w *twin) checkWrites(rescaled bool) {
	t := w.t
	t.Helper()
	ctx := t.Context()
	for i, k := range w.kinds {
		name := autoscalerName(i)
		var meta metav1.Object
		switch k {
		case hpaKind:
			h, err := w.kube.AutoscalingV2().HorizontalPodAutoscalers(w.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			meta = h
			// An HPA the agent refuses to scale for AmbiguousSelector
			// from its first sync has no decision to name.
			ambiguous := slices.ContainsFunc(h.Status.Conditions, func(c autoscalingv2.HorizontalPodAutoscalerCondition) bool {
				return c.Type == autoscalingv2.ScalingActive && c.Reason == "AmbiguousSelector"
			})
			if h.Annotations[agent.DecisionAnnotation] == "" && !ambiguous {
				t.Errorf("%s %s/%s: no %s annotation", k, w.ns, name, agent.DecisionAnnotation)
			}
		case autoscalerKind:
			u, err := w.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(w.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			meta = u
		}
		if !managedBy(meta.GetManagedFields(), agent.FieldManager, "status") {
			t.Errorf("%s %s/%s: no status fields managed by %q", k, w.ns, name, agent.FieldManager)
		}
	}
	if !rescaled {
		return
	}
	d, err := w.kube.AppsV1().Deployments(w.ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !managedBy(d.GetManagedFields(), agent.FieldManager, "scale") {
		t.Errorf("Deployment %s/app: no scale fields managed by %q", w.ns, agent.FieldManager)
	}
}

func managedBy(fields []metav1.ManagedFieldsEntry, manager, subresource string) bool {
	return slices.ContainsFunc(fields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == manager && f.Subresource == subresource })
}

// settle waits until every twin has held the reference's state for three
// sync periods with no change pending in the reference, and fails with the
// differences when that does not happen in time: it returns them, or ""
// once settled.
//
// A scale-up or scale-down held back by a stabilization window or a rate
// policy is pending: the reference says so (AbleToScale ScaleUpStabilized
// or ScaleDownStabilized, ScalingLimited ScaleUpLimit or ScaleDownLimit)
// until it happens. So a step waits out a window or a period only when it
// has something to wait for.
func (c differenceCase) settle(t *testing.T, twins []*twin, st step) string {
	t.Helper()
	s := env.settings
	hold := 3 * s.sync
	// A step may wait out a window and a policy period or two, or scale
	// down three times in a row, each after the default window, before it
	// holds still; the deadline only matters when it never does.
	deadline := time.Now().Add(60*time.Second*env.scale + 4*s.downscaleStabilizing)
	var since, lastAt time.Time
	var last string
	for time.Now().Before(deadline) {
		diff, pending, err := c.compare(t.Context(), twins, st.held)
		switch {
		case err != nil:
			last, lastAt, since = err.Error(), time.Now(), time.Time{}
		case diff != "":
			last, lastAt, since = diff, time.Now(), time.Time{}
		case pending != "":
			last, lastAt, since = "no difference, but the reference has a change pending: "+pending, time.Now(), time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= hold:
			return ""
		}
		time.Sleep(s.sync / 2)
	}
	for i := range c.autoscalers {
		for _, w := range twins[1:] {
			if e := w.explanation(i); e != "" {
				t.Logf("%s/%s: Setpoint's explanation now: %s", w.ns, autoscalerName(i), e)
			}
		}
	}
	return fmt.Sprintf("step %q: the twins did not settle to the same state; the last difference, %v before the deadline: %s",
		st.what, deadline.Sub(lastAt).Round(time.Millisecond), last)
}

// explanation is Setpoint's explanation of its last decision for the
// case's i-th autoscaler when it is an Autoscaler, or "".
func (w *twin) explanation(i int) string {
	if w.kinds[i] != autoscalerKind {
		return ""
	}
	u, err := w.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(w.ns).Get(w.t.Context(), autoscalerName(i), metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	a, err := v1alpha1.FromUnstructured(u)
	if err != nil || a.Status.Explanation == nil {
		return fmt.Sprint(err)
	}
	return fmt.Sprintf("%+v", *a.Status.Explanation)
}

// pendingConditions are the reference's conditions that say a change is
// held back for now: by a stabilization window or a rate policy's period.
var pendingConditions = []string{
	"AbleToScale=True ScaleUpStabilized:", "AbleToScale=True ScaleDownStabilized:",
	"ScalingLimited=True ScaleUpLimit:", "ScalingLimited=True ScaleDownLimit:",
}

// compare reports the differences between the reference twin's observed
// state and every other's, or "", and the reference's pending change, or ""
// (held: a rate limit that holds for good, such as a Disabled policy, is
// not pending).
func (c differenceCase) compare(ctx context.Context, twins []*twin, held bool) (diff, pending string, err error) {
	var diffs []string
	ref := twins[0]
	for i, spec := range c.autoscalers {
		want, err := ref.observe(ctx, i, spec.ScaleTargetRef.Name)
		if err != nil {
			return "", "", err
		}
		for _, cond := range want.Conditions {
			for _, p := range pendingConditions {
				if strings.HasPrefix(cond, p) && !(held && strings.HasPrefix(p, "ScalingLimited")) {
					pending = autoscalerName(i) + " " + cond
				}
			}
		}
		for _, w := range twins[1:] {
			got, err := w.observe(ctx, i, spec.ScaleTargetRef.Name)
			if err != nil {
				return "", "", err
			}
			want := want
			if w.kinds[i] != ref.kinds[i] {
				want.EventSources, got.EventSources = nil, nil
			}
			if d := cmp.Diff(want, got, quantities); d != "" {
				diffs = append(diffs, fmt.Sprintf("%s (-%s +%s):\n%s", autoscalerName(i), ref.side, w.side, d))
			}
		}
	}
	return strings.Join(diffs, "\n"), pending, nil
}
