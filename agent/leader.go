package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// ErrLeaseLost is returned by RunLeader when this replica held the lease
// and lost it before its context was done.
var ErrLeaseLost = errors.New("agent: leader lease lost")

// LeaderElection configures leader election on a coordination.k8s.io
// Lease. Zero durations take the kube-controller-manager defaults (15s,
// 10s, 2s).
type LeaderElection struct {
	// Client reads and writes the Lease.
	Client kubernetes.Interface
	// Namespace and Name name the Lease.
	Namespace, Name string
	// Identity names this replica in the Lease; unique per replica.
	Identity string
	// LeaseDuration is how long a lease is valid without renewal.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying to renew.
	RenewDeadline time.Duration
	// RetryPeriod is how often acquiring and renewing are tried.
	RetryPeriod time.Duration
	// ReleaseOnCancel releases the lease when ctx is done, so another
	// replica takes over at once.
	ReleaseOnCancel bool
	// Healthz, when set, reports the lease's renewal to a health check.
	Healthz *leaderelection.HealthzAdaptor
}

// RunLeader blocks until ctx is done or leadership is lost, running run
// with a context that is cancelled when leadership ends; it returns only
// after run has returned. It returns nil when ctx ended the election and
// ErrLeaseLost when the lease was lost.
func RunLeader(ctx context.Context, le LeaderElection, run func(ctx context.Context)) error {
	if le.LeaseDuration == 0 {
		le.LeaseDuration = 15 * time.Second
	}
	if le.RenewDeadline == 0 {
		le.RenewDeadline = 10 * time.Second
	}
	if le.RetryPeriod == 0 {
		le.RetryPeriod = 2 * time.Second
	}
	logger := klog.FromContext(ctx)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     le.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		leading bool
		stopped bool
	)
	cfg := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: le.ReleaseOnCancel,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				mu.Lock()
				if stopped {
					// The election already ended: Run returned before this
					// goroutine got to run.
					mu.Unlock()
					return
				}
				leading = true
				wg.Add(1)
				mu.Unlock()
				defer wg.Done()
				logger.Info("agent: leading", "identity", le.Identity, "lease", le.Namespace+"/"+le.Name)
				run(leaderCtx)
			},
			OnStoppedLeading: func() {
				logger.Info("agent: stopped leading", "identity", le.Identity)
			},
			OnNewLeader: func(identity string) {
				if identity != le.Identity {
					logger.Info("agent: new leader", "leader", identity)
				}
			},
		},
	}
	if le.Healthz != nil {
		cfg.WatchDog = le.Healthz
	}
	elector, err := leaderelection.NewLeaderElector(cfg)
	if err != nil {
		return fmt.Errorf("agent: leader election: %w", err)
	}
	elector.Run(ctx)
	// OnStartedLeading runs in its own goroutine; the elector cancelled
	// its context when Run returned.
	mu.Lock()
	stopped = true
	mu.Unlock()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if leading && ctx.Err() == nil {
		return ErrLeaseLost
	}
	return nil
}
