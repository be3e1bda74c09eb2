package server_test

// One way in: every gRPC method of the server and every JSON endpoint of
// its console pass the same admission.

import (
	"context"
	"crypto/tls"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/server/console"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// openServices are the services every caller may call: gRPC's health and
// reflection. Every other service passes the whole admission.
var openServices = []string{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}

// TestEveryMethodPassesAdmission calls every method of every service the
// server registers without credentials: each but openServices' is refused
// Unauthenticated by the admission and counted, before its request is
// read. A service added without admission fails here.
func TestEveryMethodPassesAdmission(t *testing.T) {
	e := startConsole(t, server.Options{})
	conn := dial(t, e.ts.addr, withTLS(&tls.Config{RootCAs: e.f.serverCA.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}))
	methods := 0
	for name, info := range e.ts.srv.ServiceInfo() {
		if slices.Contains(openServices, name) {
			continue
		}
		for _, m := range info.Methods {
			full := "/" + name + "/" + m.Name
			before := metricSum(t, e.ts.srv, "setpoint_server_refused_total", "unauthenticated")
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, full, grpc.ForceCodecV2(rawCodec{}))
			if err == nil {
				_ = stream.SendMsg(rawBytes(nil))
				_ = stream.CloseSend()
				var out rawBytes
				err = stream.RecvMsg(&out)
			}
			cancel()
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s without credentials: %v, want Unauthenticated from the admission", full, err)
			}
			if after := metricSum(t, e.ts.srv, "setpoint_server_refused_total", "unauthenticated"); after != before+1 {
				t.Errorf("%s: the admission counted %v refusals, want 1", full, after-before)
			}
			methods++
		}
	}
	if methods < 10 {
		t.Errorf("only %d guarded methods found", methods)
	}
}

// TestEveryConsoleRoutePassesAdmission requests every JSON endpoint of the
// console: without credentials each is refused by the gRPC admission
// (counted as its refusals are); with a principal's token each is served
// by the gRPC methods it names, as the gRPC metrics count them.
func TestEveryConsoleRoutePassesAdmission(t *testing.T) {
	e := startConsole(t, server.Options{})
	e.logDecisions(t, "web", 3)
	routes := console.Routes()
	if len(routes) == 0 {
		t.Fatal("no console routes")
	}
	for _, r := range routes {
		t.Run(r.Pattern, func(t *testing.T) {
			method, path, _ := strings.Cut(r.Pattern, " ")
			url := e.url + path + "?cluster=a&namespace=shop&name=web"
			var body []byte
			if method == http.MethodPost {
				body = replayOf(t, "web", nil)
			}
			before := metricSum(t, e.ts.srv, "setpoint_server_refused_total", "unauthenticated")
			if code, got := consoleWithin(t, time.Second, method, url, "", body, nil); code != http.StatusUnauthorized {
				t.Errorf("%s without credentials: %d %.200s, want 401", r.Pattern, code, got)
			}
			if after := metricSum(t, e.ts.srv, "setpoint_server_refused_total", "unauthenticated"); after <= before {
				t.Errorf("%s without credentials: not refused by the admission", r.Pattern)
			}
			started := map[string]float64{}
			for _, m := range r.Methods {
				started[m] = grpcStarted(t, e.ts.srv, m)
			}
			if code, got := consoleWithin(t, time.Second, method, url, "platform-token", body, nil); code != http.StatusOK {
				t.Errorf("%s as dashboard: %d %.200s, want 200", r.Pattern, code, got)
			}
			for _, m := range r.Methods {
				if n := grpcStarted(t, e.ts.srv, m); n <= started[m] {
					t.Errorf("%s did not call %s through the gRPC server", r.Pattern, m)
				}
			}
		})
	}
}

// grpcStarted is grpc_server_started_total of one full method.
func grpcStarted(t *testing.T, srv *server.Server, full string) float64 {
	t.Helper()
	service, method, _ := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	for _, f := range gather(t, srv) {
		if f.GetName() != "grpc_server_started_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var s, n string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "grpc_service":
					s = l.GetValue()
				case "grpc_method":
					n = l.GetValue()
				}
			}
			if s == service && n == method {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
