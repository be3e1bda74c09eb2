package acked

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Main is a TestMain body: it builds setpoint-server (with the build tags
// given) into a temporary directory, sets *binary to it, runs the tests
// and returns their exit code.
func Main(m *testing.M, binary *string, tags ...string) int {
	dir, err := os.MkdirTemp("", "setpoint-server")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *binary, err = BuildServer(dir, tags...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// Dial returns a client of the server at addr that reconnects quickly
// (FastReconnect); the connection is closed at the test's cleanup.
func Dial(t *testing.T, addr string) setpointv1.AutoscalerServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithConnectParams(FastReconnect))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return setpointv1.NewAutoscalerServiceClient(conn)
}

// Load is workers calling Work until Stop; Ledger holds what they got
// acknowledged.
type Load struct {
	Ledger Ledger
	stop   chan struct{}
	wg     sync.WaitGroup
}

// StartLoad starts workers numbered first, first+1, … calling client.
func StartLoad(client setpointv1.AutoscalerServiceClient, first, workers int) *Load {
	l := &Load{stop: make(chan struct{})}
	for w := first; w < first+workers; w++ {
		l.wg.Go(func() { Work(client, w, l.stop, &l.Ledger) })
	}
	return l
}

// Stop stops the workers and waits for them.
func (l *Load) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// Seeded returns a generator seeded with seed, or with the clock when seed
// is 0, and logs the seed with the flag that replays it.
func Seeded(t *testing.T, seed uint64, flagName string) *rand.Rand {
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -%s=%d)", seed, flagName, seed)
	return rand.New(rand.NewPCG(seed, seed))
}

// Interrupted runs the server under load and interrupts it n times, each
// at a random moment within maxUp of its start, with interrupt (which must
// leave the process ended); then it starts the server once more, stops the
// load, checks that every acknowledged call is stored (Verify), stops the
// server with SIGTERM and returns the slowest start to a first decision.
func Interrupted(t *testing.T, srv Server, client setpointv1.AutoscalerServiceClient, load *Load, n int,
	rng *rand.Rand, maxUp time.Duration, interrupt func(proc *exec.Cmd)) (slowestStart time.Duration) {
	t.Helper()
	for k := 0; ; k++ {
		proc, took := srv.Start(t, client)
		slowestStart = max(slowestStart, took)
		if k == n {
			load.Stop()
			Verify(t, client, &load.Ledger)
			if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := proc.Wait(); err != nil {
				t.Errorf("server after SIGTERM: %v", err)
			}
			break
		}
		time.Sleep(time.Duration(rng.Int64N(int64(maxUp))))
		interrupt(proc)
		if t.Failed() {
			load.Stop()
			t.FailNow()
		}
	}
	led := &load.Ledger
	if len(led.Recommends) < n || len(led.Observes) < n {
		t.Errorf("too little load to mean anything: %d Recommend, %d Observe acknowledged", len(led.Recommends), len(led.Observes))
	}
	return slowestStart
}
