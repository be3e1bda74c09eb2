package setpointclient_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
)

// Errors name the address or target and what is wrong, match their
// sentinel, and keep the gRPC code.
func TestErrorsInTheCallersTerms(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	call := func(addr string, o setpointclient.Options, key string) error {
		c, err := setpointclient.Dial(addr, o)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		k, err := setpointclient.ParseKey(key)
		if err != nil {
			return err
		}
		_, err = c.Target(ctx, k)
		return err
	}
	tests := []struct {
		name string
		err  error
		is   error
		code codes.Code
		text string
	}{
		{"no server", call(down, setpointclient.Options{}, "dev/shop/web"), setpointclient.ErrUnreachable, codes.Unavailable,
			"no Setpoint server answers at " + down + " (connection refused): is it running (setpoint-server), and is the address right?"},
		{"unknown target", call(addr, setpointclient.Options{}, "dev/shop/nope"), setpointclient.ErrTargetNotFound, codes.NotFound,
			"target dev/shop/nope not found: the service keeps no record of it (it was never decided, or was deleted)"},
		{"plaintext to TLS", call(serverAddr, setpointclient.Options{}, "dev/shop/web"), setpointclient.ErrTLSMismatch, codes.Unavailable,
			"the server at " + serverAddr + " closed the connection before answering: it probably expects TLS"},
		{"bad key", call(addr, setpointclient.Options{}, "dev/web"), setpointclient.ErrBadKey, codes.Unknown,
			`"dev/web" is not a target: a target is CLUSTER/NAMESPACE/NAME, e.g. dev/shop/web`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.is) {
				t.Errorf("%v does not match %v", tt.err, tt.is)
			}
			if got := status.Code(tt.err); got != tt.code {
				t.Errorf("code %v, want %v", got, tt.code)
			}
			if tt.err == nil || !strings.HasPrefix(tt.err.Error(), tt.text) {
				t.Errorf("error %q, want it to start with %q", tt.err, tt.text)
			}
		})
	}
}

// OnStreamState reports a watch that waits for its server, and the stream
// open again.
func TestChangesReportsStreamState(t *testing.T) {
	p := startProxy(t, addr)
	p.partition(true)
	c, err := setpointclient.Dial(p.lis.Addr().String(), setpointclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	states := make(chan error, 100)
	go func() {
		for _, err := range c.Changes(ctx, &setpointv1.WatchRequest{Cluster: "state"}, setpointclient.OnStreamState(func(err error) { states <- err })) {
			if err != nil {
				return
			}
		}
	}()
	if err := <-states; err == nil {
		t.Fatal("first state is connected, want the partition's error")
	}
	p.partition(false)
	for err := range states {
		if err == nil {
			break // connected again
		}
	}
	cancel()
}
