package etcdtest

import (
	"context"
	"fmt"
)

// LaunchOptions configure Launch.
type LaunchOptions struct {
	// Binary is the etcd binary to run.
	Binary string
	// Dir holds the members' data directories and logs; the caller
	// removes it.
	Dir string
	// Members is the number of members.
	Members int
	// NoFsync starts the members with --unsafe-no-fsync (data that may be
	// lost, as Start's is).
	NoFsync bool
}

// Launch starts a cluster as o says, outside a test (for setpoint-bench),
// and waits until every member is healthy or ctx ends. Stop kills it.
func Launch(ctx context.Context, o LaunchOptions) (*Cluster, error) {
	if o.Members <= 0 {
		return nil, fmt.Errorf("etcdtest: %d members", o.Members)
	}
	return launch(ctx, o.Binary, o.Dir, o.Members, o.NoFsync)
}

// Stop kills every member.
func (c *Cluster) Stop() {
	c.mu.Lock()
	n := len(c.members)
	c.mu.Unlock()
	for i := range n {
		c.Kill(i)
	}
}

// Pids returns the process ids of the members that run.
func (c *Cluster) Pids() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, m := range c.members {
		if m.Process != nil && m.ProcessState == nil {
			out = append(out, m.Process.Pid)
		}
	}
	return out
}
