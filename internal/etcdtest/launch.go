package etcdtest

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
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
	// SyncedDirs are the data directories of the members that run with
	// fsync whatever NoFsync says, by member (Options.SyncedDirs).
	SyncedDirs map[int]string
}

// Launch starts a cluster as o says, outside a test (for setpoint-bench),
// and waits until every member is healthy or ctx ends. Stop kills it.
func Launch(ctx context.Context, o LaunchOptions) (*Cluster, error) {
	if o.Members <= 0 {
		return nil, fmt.Errorf("etcdtest: %d members", o.Members)
	}
	ports, err := freePorts(2 * o.Members)
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: o.Binary}
	var initial []string
	for i := range o.Members {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	for i := range o.Members {
		client := "http://127.0.0.1:" + strconv.Itoa(ports[2*i])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[2*i+1])
		data, synced := o.SyncedDirs[i]
		if !synced {
			data = filepath.Join(o.Dir, fmt.Sprintf("m%d", i))
		}
		args := []string{
			"--name=" + fmt.Sprintf("m%d", i),
			"--data-dir=" + data,
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=" + strings.Join(initial, ","),
			"--initial-cluster-state=new", "--initial-cluster-token=etcdtest", "--log-level=warn",
		}
		if o.NoFsync && !synced {
			args = append(args, "--unsafe-no-fsync")
		}
		logPath := filepath.Join(o.Dir, fmt.Sprintf("m%d.log", i))
		cmd, err := startMember(o.Binary, args, logPath)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.members = append(c.members, cmd)
		c.args = append(c.args, args)
		c.Endpoints = append(c.Endpoints, client)
		c.logs = append(c.logs, logPath)
	}
	for _, ep := range c.Endpoints {
		if err := waitHealthy(ctx, ep); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// Stop kills every member.
func (c *Cluster) Stop() {
	for i := range c.members {
		c.Kill(i)
	}
}

// Pids returns the process ids of the members still running.
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
