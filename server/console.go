package server

// The web console: the embedded single-page application (server/console)
// and the JSON endpoints it reads, each of which authenticates the caller as
// the gRPC API does and calls the service behind the same policy table.

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strings"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/console"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Console bounds.
const (
	// consoleMaxTargets bounds the target list of one console page.
	consoleMaxTargets = 5000
	// consoleMaxBody bounds a replay request's body, in bytes.
	consoleMaxBody = 1 << 20
)

// ConsoleHandler serves the web console under /console/: the target list,
// each target's timeline, decision log and conditions, live updates from
// the change feed, and what-if replays. Its callers authenticate as gRPC
// callers do — a verified client certificate (when the HTTP listener serves
// TLS with client certificates) or an "Authorization: Bearer" token — and
// see what the same principal may read through the API. Without
// Options.Auth everyone sees everything, and the page says so. Nothing the
// console does changes stored state: replays run through Simulate.
func (s *Server) ConsoleHandler() http.Handler {
	c := &consoleHandler{s: s}
	assets, err := fs.Sub(console.Assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	mux := http.NewServeMux()
	mux.Handle("GET /console/", http.StripPrefix("/console/", http.FileServerFS(assets)))
	mux.HandleFunc("GET /console/api/session", c.session)
	mux.HandleFunc("GET /console/api/targets", c.targets)
	mux.HandleFunc("GET /console/api/target", c.target)
	mux.HandleFunc("GET /console/api/watch", c.watch)
	mux.HandleFunc("POST /console/api/replay", c.replay)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

// consoleHandler serves the console's endpoints.
type consoleHandler struct {
	s *Server
}

// authenticate returns the request's context carrying its principal, or
// the request's context as it is when the server runs without
// authentication.
func (c *consoleHandler) authenticate(r *http.Request) (context.Context, error) {
	ctx := r.Context()
	a := c.s.opts.Auth
	if a == nil {
		return ctx, nil
	}
	var leaf *x509.Certificate
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		leaf = r.TLS.VerifiedChains[0][0]
	}
	token := ""
	if scheme, rest, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "bearer") {
		token = strings.TrimSpace(rest)
	}
	p, presented, err := a.principal(leaf, token)
	if err != nil {
		if presented == "" {
			presented = "no credentials"
		}
		c.s.guard.audit.denied(ctx, "", presented+" (console)", r.URL.Path, codes.Unauthenticated)
		return nil, err
	}
	return withPrincipal(ctx, p), nil
}

// authorize validates req and checks it against the policy table, as the
// gRPC chain does for method.
func (c *consoleHandler) authorize(ctx context.Context, method string, req proto.Message) error {
	if v, ok := req.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return toStatus(ctx, c.s.log, err)
		}
	}
	if c.s.opts.Auth == nil {
		return nil
	}
	return c.s.guard.authorize(ctx, method, req)
}

// fail writes err (a gRPC status) as JSON with the matching HTTP status.
func (c *consoleHandler) fail(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	code := map[codes.Code]int{
		codes.InvalidArgument: http.StatusBadRequest, codes.OutOfRange: http.StatusBadRequest,
		codes.Unauthenticated: http.StatusUnauthorized, codes.PermissionDenied: http.StatusForbidden,
		codes.NotFound: http.StatusNotFound, codes.ResourceExhausted: http.StatusTooManyRequests,
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

// session says who the caller is and how the server is secured.
func (c *consoleHandler) session(w http.ResponseWriter, r *http.Request) {
	ctx, err := c.authenticate(r)
	if err != nil {
		c.fail(w, err)
		return
	}
	out := map[string]any{
		"authenticated": c.s.opts.Auth != nil,
		"tls":           c.s.opts.TLS != nil,
		"replayLimits":  ReplayLimits,
	}
	if p, ok := PrincipalFrom(ctx); ok {
		out["principal"], out["role"] = p.Name, string(p.Role)
	}
	switch {
	case c.s.opts.Auth == nil:
		out["warning"] = "INSECURE DEVELOPMENT MODE: no authentication — everyone who reaches this address sees every target. Never use it outside a developer's machine."
	case c.s.opts.TLS == nil:
		out["warning"] = "INSECURE DEVELOPMENT MODE: the gRPC API is plaintext — tokens cross the network unencrypted. Never use it outside a developer's machine."
	}
	reply(w, out)
}

// readableClusters are the clusters whose targets a List with no cluster
// filter shows ctx's principal: "" (every cluster) when it may read all.
func readableClusters(ctx context.Context, authenticated bool) []string {
	p, ok := PrincipalFrom(ctx)
	if !authenticated || (ok && p.CanRead("")) {
		return []string{""}
	}
	if own, isCluster := p.Role.Cluster(); ok && isCluster {
		return []string{own}
	}
	if ok && p.Role == RolePlatform {
		return p.Clusters
	}
	return nil
}

// targets lists the targets the caller may read, optionally of one cluster
// and namespace, at most consoleMaxTargets.
func (c *consoleHandler) targets(w http.ResponseWriter, r *http.Request) {
	ctx, err := c.authenticate(r)
	if err != nil {
		c.fail(w, err)
		return
	}
	cluster, namespace := r.URL.Query().Get("cluster"), r.URL.Query().Get("namespace")
	clusters := []string{cluster}
	if cluster == "" {
		clusters = readableClusters(ctx, c.s.opts.Auth != nil)
	}
	all := &setpointv1.ListTargetsResponse{}
	truncated := false
	for _, cl := range clusters {
		req := &setpointv1.ListTargetsRequest{Cluster: cl, Namespace: namespace, PageSize: setpointv1.MaxPageSize}
		if err := c.authorize(ctx, setpointv1.AutoscalerService_ListTargets_FullMethodName, req); err != nil {
			c.fail(w, err)
			return
		}
		for {
			resp, err := c.s.svc.ListTargets(ctx, req)
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
				break
			}
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
				break
			}
		}
	}
	reply(w, map[string]any{"list": all, "truncated": truncated})
}

// keyOf reads a target key from the query.
func keyOf(r *http.Request) *setpointv1.TargetKey {
	q := r.URL.Query()
	return &setpointv1.TargetKey{Cluster: q.Get("cluster"), Namespace: q.Get("namespace"), Name: q.Get("name")}
}

// target returns one target and its whole decision log.
func (c *consoleHandler) target(w http.ResponseWriter, r *http.Request) {
	ctx, err := c.authenticate(r)
	if err != nil {
		c.fail(w, err)
		return
	}
	key := keyOf(r)
	t, err := c.getTarget(ctx, key)
	if err != nil {
		c.fail(w, err)
		return
	}
	log, err := c.decisions(ctx, key)
	if err != nil {
		c.fail(w, err)
		return
	}
	reply(w, map[string]any{"target": t.GetTarget(), "log": log})
}

// getTarget authorizes and calls GetTarget.
func (c *consoleHandler) getTarget(ctx context.Context, key *setpointv1.TargetKey) (*setpointv1.GetTargetResponse, error) {
	get := &setpointv1.GetTargetRequest{Target: key}
	if err := c.authorize(ctx, setpointv1.AutoscalerService_GetTarget_FullMethodName, get); err != nil {
		return nil, err
	}
	return c.s.svc.GetTarget(ctx, get)
}

// decisions reads key's whole decision log through ListDecisions.
func (c *consoleHandler) decisions(ctx context.Context, key *setpointv1.TargetKey) (*setpointv1.ListDecisionsResponse, error) {
	req := &setpointv1.ListDecisionsRequest{Target: key, PageSize: setpointv1.MaxDecisionsPageSize}
	if err := c.authorize(ctx, setpointv1.AutoscalerService_ListDecisions_FullMethodName, req); err != nil {
		return nil, err
	}
	all := &setpointv1.ListDecisionsResponse{}
	for {
		resp, err := c.s.svc.ListDecisions(ctx, req)
		if err != nil {
			return nil, err
		}
		all.Decisions = append(all.Decisions, resp.GetDecisions()...)
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			return all, nil
		}
	}
}

// replayBody is a replay request: the target whose log is replayed and the
// edited spec (protojson).
type replayBody struct {
	Target json.RawMessage `json:"target"`
	Spec   json.RawMessage `json:"spec"`
}

// replay runs a target's logged decisions through Simulate with an edited
// spec and returns the request it ran, Simulate's answer and the replay's
// limits. Nothing is stored.
func (c *consoleHandler) replay(w http.ResponseWriter, r *http.Request) {
	ctx, err := c.authenticate(r)
	if err != nil {
		c.fail(w, err)
		return
	}
	var body replayBody
	key, spec := &setpointv1.TargetKey{}, &setpointv1.HorizontalPodAutoscalerSpec{}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, consoleMaxBody))
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err == nil {
		err = errors.Join(protojson.Unmarshal(body.Target, key), protojson.Unmarshal(body.Spec, spec))
	}
	if err != nil {
		c.fail(w, status.Errorf(codes.InvalidArgument, "replay: the body must be {\"target\": TargetKey, \"spec\": HorizontalPodAutoscalerSpec} in JSON: %v", err))
		return
	}
	t, err := c.getTarget(ctx, key)
	if err != nil {
		c.fail(w, err)
		return
	}
	logged, err := c.loggedDecisions(ctx, key)
	if err != nil {
		c.fail(w, err)
		return
	}
	if len(logged) == 0 {
		c.fail(w, status.Error(codes.FailedPrecondition, "replay: the target has no logged decisions"))
		return
	}
	sim := replaySimulation(spec, t.GetTarget().GetSettings(), logged, c.s.opts.MaxSimulateSteps)
	if err := c.authorize(ctx, setpointv1.AutoscalerService_Simulate_FullMethodName, sim); err != nil {
		c.fail(w, err)
		return
	}
	resp, err := c.s.svc.Simulate(ctx, sim)
	if err != nil {
		c.fail(w, err)
		return
	}
	reply(w, map[string]any{"request": sim, "response": resp, "limits": ReplayLimits})
}

// loggedDecisions authorizes ListDecisions and reads key's whole decision
// log from the store, in the store's form.
func (c *consoleHandler) loggedDecisions(ctx context.Context, key *setpointv1.TargetKey) ([]target.LoggedDecision, error) {
	req := &setpointv1.ListDecisionsRequest{Target: key}
	if err := c.authorize(ctx, setpointv1.AutoscalerService_ListDecisions_FullMethodName, req); err != nil {
		return nil, err
	}
	var all []target.LoggedDecision
	q := store.DecisionQuery{PageSize: store.MaxDecisionsPageSize}
	for {
		page, next, err := c.s.store.Decisions(ctx, convert.Key(key), q)
		if err != nil {
			return nil, toStatus(ctx, c.s.log, err)
		}
		all = append(all, page...)
		if q.PageToken = next; next == "" {
			return all, nil
		}
	}
}

// watch streams the changes of the targets the caller may read (optionally
// one cluster, namespace or target) as server-sent events, one protojson
// WatchResponse per "data:" line, through the same Watch as the gRPC API.
func (c *consoleHandler) watch(w http.ResponseWriter, r *http.Request) {
	ctx, err := c.authenticate(r)
	if err != nil {
		c.fail(w, err)
		return
	}
	q := r.URL.Query()
	req := &setpointv1.WatchRequest{Cluster: q.Get("cluster"), Namespace: q.Get("namespace"), Name: q.Get("name")}
	if err := c.authorize(ctx, setpointv1.AutoscalerService_Watch_FullMethodName, req); err != nil {
		c.fail(w, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		c.fail(w, status.Error(codes.Unimplemented, "watch: this connection cannot stream"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, ": watching\n\n")
	flusher.Flush()
	err = c.s.svc.Watch(req, &sseStream{ctx: ctx, w: w, flush: flusher.Flush})
	if err != nil && ctx.Err() == nil {
		b, _ := json.Marshal(map[string]string{"code": status.Code(err).String(), "message": status.Convert(err).Message()})
		_, _ = io.WriteString(w, "event: end\ndata: "+string(b)+"\n\n")
		flusher.Flush()
	}
}

// sseStream is the server side of a Watch call whose messages are written
// as server-sent events.
type sseStream struct {
	grpc.ServerStream
	ctx   context.Context
	w     io.Writer
	flush func()
}

// Context is the HTTP request's context, with its principal.
func (s *sseStream) Context() context.Context { return s.ctx }

// SendHeader ignores the header: the console reloads instead of resuming.
func (s *sseStream) SendHeader(metadata.MD) error { return nil }

// Send writes m as one event.
func (s *sseStream) Send(m *setpointv1.WatchResponse) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(s.w, "data: "+string(b)+"\n\n"); err != nil {
		return err
	}
	s.flush()
	return nil
}
