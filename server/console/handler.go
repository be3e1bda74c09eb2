package console

// The console's JSON endpoints. Each is a translation: it makes gRPC calls
// through the server's door (package door) with the browser's identity, so
// every one passes the server's whole admission — nothing here
// authenticates, authorizes, limits or budgets by itself.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/setpointhq/setpoint/internal/netaddr"
	consolev1 "github.com/setpointhq/setpoint/proto/setpoint/console/v1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/door"
	"github.com/setpointhq/setpoint/server/simulate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Console bounds.
const (
	// consoleMaxTargets bounds the target list of one console page.
	consoleMaxTargets = 5000
	// consoleMaxBody bounds a replay request's body, in bytes.
	consoleMaxBody = 1 << 20
	// consoleMaxDecisions bounds one page of the decision log the
	// console asks for, in decisions.
	consoleMaxDecisions = 500
	// consoleMaxFleets bounds the fleet list of one console page.
	consoleMaxFleets = 1000
)

// Options say what the console's endpoints need of the server.
type Options struct {
	// Conn returns the client connection of the server's door; nil while
	// the server is not serving (the endpoints answer Unavailable).
	Conn func() *grpc.ClientConn
	// Authenticated says the server authenticates its callers; without,
	// the console says so on every page and answers loopback names only.
	Authenticated bool
}

// Handler serves the web console under /console/: the target list, each
// target's timeline, decision log and conditions, live updates from the
// change feed, what-if replays, and the fleets with their decision and
// split. Its callers authenticate as gRPC
// callers do — a verified client certificate (when the HTTP listener serves
// TLS with client certificates) or an "Authorization: Bearer" token — and
// see what the same principal may read through the API, because every
// endpoint calls the API as them. Nothing the console does changes stored
// state: replays run through Simulate.
func Handler(o Options) http.Handler {
	c := &consoleHandler{o: o}
	assets, err := fs.Sub(Assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	mux := http.NewServeMux()
	// The page itself: embedded files, no data.
	mux.Handle("GET /console/", http.StripPrefix("/console/", http.FileServerFS(assets)))
	for _, r := range routes {
		serve := r.serve(c)
		mux.HandleFunc(r.Pattern, func(w http.ResponseWriter, req *http.Request) {
			if conn := c.conn(w); conn != nil {
				serve(w, req, conn)
			}
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := c.screen(r); err != nil {
			c.fail(w, err)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if strings.HasPrefix(r.URL.Path, "/console/api/") {
			h.Set("Cache-Control", "no-store")
		}
		mux.ServeHTTP(w, r)
	})
}

// Route is one of the console's JSON endpoints: its pattern (as
// http.ServeMux reads it) and the gRPC methods it calls through the door
// (for a target's key in its query), the only way it reaches the service.
type Route struct {
	Pattern string
	Methods []string
	serve   func(*consoleHandler) consoleEndpoint
}

// consoleEndpoint serves one endpoint with the door's connection.
type consoleEndpoint func(w http.ResponseWriter, r *http.Request, conn *grpc.ClientConn)

// routes are every JSON endpoint of the console.
var routes = []Route{
	{"GET /console/api/session", []string{consolev1.SessionService_Who_FullMethodName}, func(c *consoleHandler) consoleEndpoint { return c.session }},
	// Without a cluster, targets also asks Who which clusters to list.
	{"GET /console/api/targets", []string{setpointv1.AutoscalerService_ListTargets_FullMethodName}, func(c *consoleHandler) consoleEndpoint { return c.targets }},
	{"GET /console/api/target", []string{setpointv1.AutoscalerService_GetTarget_FullMethodName}, func(c *consoleHandler) consoleEndpoint { return c.target }},
	{"GET /console/api/decisions", []string{setpointv1.AutoscalerService_ListDecisions_FullMethodName}, func(c *consoleHandler) consoleEndpoint { return c.decisions }},
	{"GET /console/api/watch", []string{setpointv1.AutoscalerService_Watch_FullMethodName}, func(c *consoleHandler) consoleEndpoint { return c.watch }},
	{"POST /console/api/replay", []string{consolev1.ReplayService_Replay_FullMethodName}, func(c *consoleHandler) consoleEndpoint { return c.replay }},
	// With a name, fleets answers that one fleet of the namespace only.
	{"GET /console/api/fleets", []string{setpointv1.FleetService_ListFleets_FullMethodName}, func(c *consoleHandler) consoleEndpoint { return c.fleets }},
}

// Routes returns the console's JSON endpoints.
func Routes() []Route { return slices.Clone(routes) }

// consoleHandler serves the console's endpoints through the door.
type consoleHandler struct {
	o Options
}

// errNotServing answers a console request while the gRPC server is not
// serving (before Serve, after it returned).
var errNotServing = status.Error(codes.Unavailable, "console: the server is not serving")

// conn returns the door's client connection; nil and errNotServing
// written to w while the server is not serving.
func (c *consoleHandler) conn(w http.ResponseWriter) *grpc.ClientConn {
	conn := c.o.Conn()
	if conn == nil {
		c.fail(w, errNotServing)
	}
	return conn
}

// screen refuses what a browser may be tricked into sending before any
// call is made: without authentication (the development mode) a Host that
// is not a loopback name (DNS rebinding: a page of another site reading a
// developer's console); and a state-changing request (POST) that is not
// JSON or not from the console's own origin (cross-site request forgery:
// a form posted by another site with the browser's client certificate).
func (c *consoleHandler) screen(r *http.Request) error {
	if !c.o.Authenticated && !loopbackHost(r.Host) {
		return status.Error(codes.PermissionDenied, "console: without authentication the console answers loopback names only (localhost, 127.0.0.1, ::1)")
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return status.Error(codes.InvalidArgument, "console: a request that changes anything must be application/json")
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return status.Error(codes.PermissionDenied, "console: cross-site request refused")
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return status.Error(codes.PermissionDenied, "console: cross-origin request refused")
		}
	}
	return nil
}

// loopbackHost reports whether a Host header names this machine's
// loopback interface: localhost or a loopback IP, with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return netaddr.LoopbackHost(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}

// fail writes err (a gRPC status) as JSON with the matching HTTP status.
func (c *consoleHandler) fail(w http.ResponseWriter, err error) {
	c.failFor(nil, w, err)
}

// refusalHold is how long a request refused for its caller's volume
// (ResourceExhausted) is held before its 429 is answered, at most: the
// refusal's own retry delay (google.rpc.RetryInfo) when shorter. A client
// that retries at once, refused or not, then costs a refusal per hold and
// connection instead of as many as it can send; Retry-After says the same
// to one that listens.
const refusalHold = 250 * time.Millisecond

// failFor is fail for request r: a refusal for volume is held (refusalHold)
// unless r ends first.
func (c *consoleHandler) failFor(r *http.Request, w http.ResponseWriter, err error) {
	st := status.Convert(err)
	if st.Code() == codes.ResourceExhausted {
		hold := refusalHold
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() < hold {
				hold = max(0, ri.GetRetryDelay().AsDuration())
			}
		}
		w.Header().Set("Retry-After", "1") // whole seconds: the least it can say
		if r != nil {
			t := time.NewTimer(hold)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
			}
		}
	}
	code := map[codes.Code]int{
		codes.InvalidArgument: http.StatusBadRequest, codes.OutOfRange: http.StatusBadRequest,
		codes.Unauthenticated: http.StatusUnauthorized, codes.PermissionDenied: http.StatusForbidden,
		codes.NotFound: http.StatusNotFound, codes.ResourceExhausted: http.StatusTooManyRequests,
		codes.FailedPrecondition: http.StatusConflict, codes.DeadlineExceeded: http.StatusGatewayTimeout,
		codes.Unavailable: http.StatusServiceUnavailable, codes.Canceled: 499,
	}[st.Code()]
	if code == 0 {
		code = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": st.Code().String(), "message": st.Message()})
}

// reply writes parts as one JSON object, each a protobuf message in
// protojson or any other value in encoding/json.
func reply(w http.ResponseWriter, parts map[string]any) {
	out := map[string]json.RawMessage{}
	for k, v := range parts {
		var b []byte
		var err error
		if m, ok := v.(proto.Message); ok {
			b, err = protojson.Marshal(m)
		} else {
			b, err = json.Marshal(v)
		}
		if err != nil {
			http.Error(w, "cannot encode the answer", http.StatusInternalServerError)
			return
		}
		out[k] = b
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// session says who the caller is (the Session service's Who) and how the
// request reached the server.
func (c *consoleHandler) session(w http.ResponseWriter, r *http.Request, conn *grpc.ClientConn) {
	who, err := consolev1.NewSessionServiceClient(conn).Who(door.Context(r), &consolev1.WhoRequest{})
	if err != nil {
		c.fail(w, err)
		return
	}
	out := map[string]any{
		"authenticated": c.o.Authenticated,
		"tls":           r.TLS != nil,
		"replayLimits":  simulate.ReplayLimits,
	}
	if who.GetPrincipal() != "" {
		out["principal"], out["role"] = who.GetPrincipal(), who.GetRole()
	}
	switch {
	case !c.o.Authenticated:
		out["warning"] = "INSECURE DEVELOPMENT MODE: no authentication — everyone who reaches this address sees every target. Never use it outside a developer's machine."
	case r.TLS == nil:
		out["warning"] = "INSECURE: this console is served over plaintext HTTP — tokens cross the network unencrypted. Never use it outside a developer's machine."
	}
	reply(w, out)
}

// targets lists the targets the caller may read (ListTargets, page by
// page), optionally of one cluster and namespace, at most
// consoleMaxTargets. Without a cluster it lists the clusters the caller's
// role names (a role that may read every cluster lists them all at once).
func (c *consoleHandler) targets(w http.ResponseWriter, r *http.Request, conn *grpc.ClientConn) {
	ctx := door.Context(r)
	cluster, namespace := r.URL.Query().Get("cluster"), r.URL.Query().Get("namespace")
	clusters := []string{cluster}
	if cluster == "" {
		var err error
		if clusters, err = readableClusters(ctx, conn); err != nil {
			c.fail(w, err)
			return
		}
	}
	all := &setpointv1.ListTargetsResponse{}
	truncated := false
	for _, cl := range clusters {
		req := &setpointv1.ListTargetsRequest{Cluster: cl, Namespace: namespace, PageSize: setpointv1.MaxPageSize}
		for !truncated {
			resp, err := setpointv1.NewAutoscalerServiceClient(conn).ListTargets(ctx, req)
			if err != nil {
				c.fail(w, err)
				return
			}
			for _, t := range resp.GetTargets() {
				t.History, t.Events = nil, nil // the list needs neither
			}
			all.Targets = append(all.Targets, resp.GetTargets()...)
			if len(all.Targets) >= consoleMaxTargets {
				all.Targets, truncated = all.Targets[:consoleMaxTargets], true
			}
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
				break
			}
		}
	}
	reply(w, map[string]any{"list": all, "truncated": truncated})
}

// readableClusters are the clusters whose targets a list without a
// cluster filter shows ctx's caller, as Who answers them ("": every
// cluster).
func readableClusters(ctx context.Context, conn *grpc.ClientConn) ([]string, error) {
	who, err := consolev1.NewSessionServiceClient(conn).Who(ctx, &consolev1.WhoRequest{})
	if err != nil {
		return nil, err
	}
	return who.GetReadableClusters(), nil
}

// keyOf reads a target key from the query.
func keyOf(r *http.Request) *setpointv1.TargetKey {
	q := r.URL.Query()
	return &setpointv1.TargetKey{Cluster: q.Get("cluster"), Namespace: q.Get("namespace"), Name: q.Get("name")}
}

// target returns one target (GetTarget); its decision log is read page by
// page through decisions.
func (c *consoleHandler) target(w http.ResponseWriter, r *http.Request, conn *grpc.ClientConn) {
	resp, err := setpointv1.NewAutoscalerServiceClient(conn).GetTarget(door.Context(r), &setpointv1.GetTargetRequest{Target: keyOf(r)})
	if err != nil {
		c.fail(w, err)
		return
	}
	reply(w, map[string]any{"target": resp.GetTarget()})
}

// decisions returns one page of a target's decision log (ListDecisions):
// query parameters cluster, namespace, name, start_time and end_time
// (RFC 3339), page_size (at most consoleMaxDecisions; 0 means it) and
// page_token.
func (c *consoleHandler) decisions(w http.ResponseWriter, r *http.Request, conn *grpc.ClientConn) {
	q := r.URL.Query()
	req := &setpointv1.ListDecisionsRequest{Target: keyOf(r), PageSize: consoleMaxDecisions, PageToken: q.Get("page_token")}
	var bad []string
	if v := q.Get("page_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > consoleMaxDecisions {
			bad = append(bad, fmt.Sprintf("page_size must be within [0, %d]", consoleMaxDecisions))
		} else if n > 0 {
			req.PageSize = int32(n)
		}
	}
	for name, ts := range map[string]**timestamppb.Timestamp{"start_time": &req.StartTime, "end_time": &req.EndTime} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				bad = append(bad, name+" must be an RFC 3339 time")
				continue
			}
			*ts = timestamppb.New(t)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		c.fail(w, status.Error(codes.InvalidArgument, "decisions: "+strings.Join(bad, "; ")))
		return
	}
	resp, err := setpointv1.NewAutoscalerServiceClient(conn).ListDecisions(door.Context(r), req)
	if err != nil {
		c.fail(w, err)
		return
	}
	reply(w, map[string]any{"log": resp})
}

// fleets lists the fleets the caller may read (ListFleets, page by page),
// optionally of one namespace, at most consoleMaxFleets, without their
// histories. With a name (and a namespace) it answers that fleet alone,
// with its history, or none when the caller may not read it or it does
// not exist: the fleet's page reads it so, through the same call as the
// list, and a fleet the caller may not read is not told from one that
// does not exist.
func (c *consoleHandler) fleets(w http.ResponseWriter, r *http.Request, conn *grpc.ClientConn) {
	q := r.URL.Query()
	namespace, name := q.Get("namespace"), q.Get("name")
	if name != "" && namespace == "" {
		c.fail(w, status.Error(codes.InvalidArgument, "fleets: a name needs its namespace"))
		return
	}
	all := &setpointv1.ListFleetsResponse{}
	truncated := false
	req := &setpointv1.ListFleetsRequest{Namespace: namespace}
	for {
		resp, err := setpointv1.NewFleetServiceClient(conn).ListFleets(door.Context(r), req)
		if err != nil {
			c.fail(w, err)
			return
		}
		for _, f := range resp.GetFleets() {
			switch {
			case name == "":
				f.History = nil // the list does not need it
			case f.GetKey().GetName() != name:
				continue
			}
			all.Fleets = append(all.Fleets, f)
		}
		if len(all.Fleets) >= consoleMaxFleets {
			all.Fleets, truncated = all.Fleets[:consoleMaxFleets], true
			break
		}
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	reply(w, map[string]any{"list": all, "truncated": truncated})
}

// replayBody is a replay request: the target whose log is replayed, the
// edited spec (protojson), and the range of the log replayed (the
// decisions the page shows: start_time inclusive, end_time exclusive).
type replayBody struct {
	Target    json.RawMessage `json:"target"`
	Spec      json.RawMessage `json:"spec"`
	StartTime string          `json:"startTime"`
	EndTime   string          `json:"endTime"`
}

// replay runs a target's logged decisions (at most the server's Simulate
// step limit, the oldest of the range) through Simulate with an edited
// spec and returns the request it ran, Simulate's answer and the replay's
// limits. Nothing is stored. It is one call as the caller, through the
// door: the Replay service reads the target and its log and runs the
// replay, admitted as a Simulate.
func (c *consoleHandler) replay(w http.ResponseWriter, r *http.Request, conn *grpc.ClientConn) {
	var body replayBody
	req := &consolev1.ReplayRequest{Target: &setpointv1.TargetKey{}, Spec: &setpointv1.HorizontalPodAutoscalerSpec{}}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, consoleMaxBody))
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err == nil {
		err = errors.Join(protojson.Unmarshal(body.Target, req.Target), protojson.Unmarshal(body.Spec, req.Spec))
	}
	for _, b := range []struct {
		v  string
		ts **timestamppb.Timestamp
	}{{body.StartTime, &req.StartTime}, {body.EndTime, &req.EndTime}} {
		if err == nil && b.v != "" {
			var t time.Time
			if t, err = time.Parse(time.RFC3339Nano, b.v); err == nil {
				*b.ts = timestamppb.New(t)
			}
		}
	}
	if err != nil {
		c.fail(w, status.Error(codes.InvalidArgument, "replay: the body must be {\"target\": TargetKey, \"spec\": HorizontalPodAutoscalerSpec, \"startTime\", \"endTime\": RFC 3339} in JSON"))
		return
	}
	resp, err := consolev1.NewReplayServiceClient(conn).Replay(door.Context(r), req)
	if err != nil {
		c.failFor(r, w, err)
		return
	}
	reply(w, map[string]any{"response": resp.GetResponse(), "limits": simulate.ReplayLimits})
}

// watch streams the changes of the targets the caller may read (optionally
// one cluster, namespace or target) as server-sent events, one protojson
// WatchResponse per "data:" line: a Watch call through the door, counted
// against the caller's stream bound like any other.
func (c *consoleHandler) watch(w http.ResponseWriter, r *http.Request, conn *grpc.ClientConn) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		c.fail(w, status.Error(codes.Unimplemented, "watch: this connection cannot stream"))
		return
	}
	q := r.URL.Query()
	stream, err := setpointv1.NewAutoscalerServiceClient(conn).Watch(door.Context(r), &setpointv1.WatchRequest{Cluster: q.Get("cluster"), Namespace: q.Get("namespace"), Name: q.Get("name")})
	if err == nil {
		// A refused call (admission, authorization) ends without a
		// header: its status is Recv's error. Wait for either before
		// answering 200.
		var md metadata.MD
		if md, err = stream.Header(); err == nil && md == nil {
			if _, err = stream.Recv(); err == nil || err == io.EOF {
				err = status.Error(codes.Unavailable, "watch: the stream ended before it began")
			}
		}
	}
	if err != nil {
		c.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, ": watching\n\n")
	flusher.Flush()
	for {
		m, err := stream.Recv()
		if err != nil {
			if r.Context().Err() == nil {
				b, _ := json.Marshal(map[string]string{"code": status.Code(err).String(), "message": status.Convert(err).Message()})
				_, _ = io.WriteString(w, "event: end\ndata: "+string(b)+"\n\n")
				flusher.Flush()
			}
			return
		}
		b, err := protojson.Marshal(m)
		if err != nil {
			return
		}
		if _, err := io.WriteString(w, "data: "+string(b)+"\n\n"); err != nil {
			return
		}
		flusher.Flush()
	}
}
