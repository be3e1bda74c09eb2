package setpointclient

import (
	"context"
	"errors"
	"io"
	"iter"
	"strconv"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// revisionHeader is the Watch response header that gives the revision
// the stream starts after (server.RevisionHeader).
const revisionHeader = "setpoint-revision"

// Back-off between Watch reconnections: doubling from the first to the
// last, reset by every change received.
const (
	watchBackoffFirst = 100 * time.Millisecond
	watchBackoffMax   = 5 * time.Second
)

// Changes follows Watch: it yields every change req selects, in revision
// order, and when the stream breaks (the server restarts, the connection
// drops, or it cannot reach its store: UNAVAILABLE, or the server ends the
// stream) it calls Watch again with resume_after set to the last revision
// it yielded, so nothing the service still keeps is missed or repeated.
// With several servers (Dial's address lists them) the new call goes to
// the next healthy one, round-robin: a resume point of one server is good
// on every server sharing its store. req.ResumeAfter is where the
// first call starts (0: changes made after the call, and a reconnection
// resumes from the revision the server said the stream started after); req
// is not modified.
//
// The iteration ends when the caller stops it, or after yielding one error:
// the context's error once ctx is done, or an error the server answered
// that a retry cannot fix (PERMISSION_DENIED, INVALID_ARGUMENT, or
// OUT_OF_RANGE when the resume point is older than the history kept).
func (c *Client) Changes(ctx context.Context, req *setpointv1.WatchRequest, opts ...WatchOption) iter.Seq2[*setpointv1.WatchResponse, error] {
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	return func(yield func(*setpointv1.WatchResponse, error) bool) {
		next := proto.CloneOf(req)
		backoff := watchBackoffFirst
		for {
			received, err := c.watchOnce(ctx, next, &o, yield)
			if received {
				backoff = watchBackoffFirst
			}
			switch {
			case errors.Is(err, errStopped):
				return
			case ctx.Err() != nil:
				yield(nil, ctx.Err())
				return
			case !resumable(err):
				yield(nil, err)
				return
			}
			o.broken = true
			if o.onState != nil {
				o.onState(err)
			}
			select {
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, watchBackoffMax)
		}
	}
}

// WatchOption changes how Changes follows Watch.
type WatchOption func(*watchOptions)

// watchOptions are the WatchOptions given, and the state they need.
type watchOptions struct {
	onState func(err error)
	// broken is true from a break until a stream is open again.
	broken bool
}

// OnStreamState makes Changes call f with the error each time the stream
// breaks and Changes is about to call Watch again (the server is down or
// restarting: ErrUnreachable), and with nil once a stream is open again,
// so a caller can show that it is waiting rather than seem to hang. f runs
// on the iterating goroutine.
func OnStreamState(f func(err error)) WatchOption {
	return func(o *watchOptions) { o.onState = f }
}

// errStopped marks an iteration the caller stopped.
var errStopped = errors.New("setpointclient: iteration stopped")

// watchOnce runs one Watch call, yielding its changes and advancing
// req.ResumeAfter past each; it returns whether any change arrived and the
// error that ended the stream (io.EOF when the server ended it).
func (c *Client) watchOnce(ctx context.Context, req *setpointv1.WatchRequest, o *watchOptions, yield func(*setpointv1.WatchResponse, error) bool) (received bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Watch(ctx, req)
	if err != nil {
		return false, err
	}
	md, err := stream.Header()
	if err != nil {
		return false, err
	}
	if o.broken && o.onState != nil {
		o.broken = false
		o.onState(nil)
	}
	// The server names the revision the stream starts after; from then on
	// a reconnection resumes there, even before any change arrived.
	if req.ResumeAfter == 0 {
		if v := md.Get(revisionHeader); len(v) == 1 {
			if rev, err := strconv.ParseUint(v[0], 10, 64); err == nil {
				req.ResumeAfter = rev
			}
		}
	}
	for {
		ch, err := stream.Recv()
		if err != nil {
			return received, err
		}
		received = true
		// Changes arrive in order, so the last one is where to resume. A
		// caller that may not read every cluster gets sealed resume points
		// that do not grow: never compare them, only pass them back.
		req.ResumeAfter = ch.GetRevision()
		if !yield(ch, nil) {
			return received, errStopped
		}
	}
}

// resumable reports whether a Watch that ended with err is worth calling
// again.
func resumable(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Aborted, codes.ResourceExhausted, codes.Internal:
		return true
	}
	return false
}
