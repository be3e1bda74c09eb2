package setpointv1

import (
	"fmt"
	"strings"
)

// This file is written by hand, next to the generated types: the request
// checks that need no Kubernetes parsing (identity, presence, paging). The
// deep checks (quantities, types, limits) are made by the server's
// conversion package, which reports them with the same ValidationError.

// FieldViolation names one invalid request field and says why.
type FieldViolation struct {
	// Field is the path of the field in the request, with proto field
	// names: "spec.metrics[2].external.target.average_value".
	Field string
	// Description says what is wrong with it.
	Description string
}

// ValidationError lists the invalid fields of a request. The server answers
// it with InvalidArgument and a google.rpc.BadRequest detail.
type ValidationError struct {
	// Violations are the invalid fields, in the order they were found.
	Violations []FieldViolation
}

// maxViolations bounds the violations kept for one request.
const maxViolations = 50

// Error implements error.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("setpoint: invalid request")
	for i, v := range e.Violations {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(v.Field + ": " + v.Description)
	}
	return b.String()
}

// Add records a violation of field; the description is formatted with
// fmt.Sprintf.
func (e *ValidationError) Add(field, format string, args ...any) {
	if len(e.Violations) < maxViolations {
		e.Violations = append(e.Violations, FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)})
	}
}

// Err returns e when it holds violations and nil otherwise.
func (e *ValidationError) Err() error {
	if e == nil || len(e.Violations) == 0 {
		return nil
	}
	return e
}

// maxNameLength bounds cluster, namespace and name (Kubernetes names are at
// most 253 characters).
const maxNameLength = 253

// validateKey checks a target key: every part set, bounded, and free of the
// NUL byte the store uses as a separator; a cluster that starts with "@"
// is reserved (the service keeps its fleets under "@fleet").
func validateKey(e *ValidationError, field string, k *TargetKey) {
	if k == nil {
		e.Add(field, "must be set")
		return
	}
	if strings.HasPrefix(k.Cluster, "@") {
		e.Add(field+".cluster", "must not start with '@' (reserved for the service's own records)")
	}
	validateNames(e, field, []struct{ name, value string }{{"cluster", k.Cluster}, {"namespace", k.Namespace}, {"name", k.Name}})
}

// validateNames checks the parts of a key: set, bounded, and free of '/'
// and NUL.
func validateNames(e *ValidationError, field string, parts []struct{ name, value string }) {
	for _, p := range parts {
		switch {
		case p.value == "":
			e.Add(field+"."+p.name, "must be set")
		case len(p.value) > maxNameLength:
			e.Add(field+"."+p.name, "must be at most %d bytes", maxNameLength)
		case strings.ContainsAny(p.value, "\x00/"):
			e.Add(field+"."+p.name, "must not contain '/' or NUL")
		}
	}
}

// Validate checks the request's identity and that spec and scale are
// present; the rest is checked when the request is converted.
func (r *RecommendRequest) Validate() error {
	e := &ValidationError{}
	validateKey(e, "target", r.GetTarget())
	if r.GetSpec() == nil {
		e.Add("spec", "must be set")
	}
	if r.GetScale() == nil {
		e.Add("scale", "must be set")
	}
	return e.Err()
}

// Validate checks the request's identity, that a change is set, and that
// applied and failed changes name their decision.
func (r *ObserveRequest) Validate() error {
	e := &ValidationError{}
	validateKey(e, "target", r.GetTarget())
	switch c := r.GetChange().(type) {
	case nil:
		e.Add("change", "one of applied, failed or external must be set")
	case *ObserveRequest_Applied:
		if r.GetDecisionId() == "" {
			e.Add("decision_id", "must be set for an applied change")
		}
		if c.Applied.GetFrom() < 0 {
			e.Add("applied.from", "must be >= 0")
		}
		if c.Applied.GetTo() < 0 {
			e.Add("applied.to", "must be >= 0")
		}
	case *ObserveRequest_Failed:
		if r.GetDecisionId() == "" {
			e.Add("decision_id", "must be set for a failed change")
		}
		if c.Failed.GetTo() < 0 {
			e.Add("failed.to", "must be >= 0")
		}
	case *ObserveRequest_External:
		if c.External.GetFrom() < 0 {
			e.Add("external.from", "must be >= 0")
		}
		if c.External.GetTo() < 0 {
			e.Add("external.to", "must be >= 0")
		}
	}
	return e.Err()
}

// Validate checks the request's identity.
func (r *GetTargetRequest) Validate() error {
	e := &ValidationError{}
	validateKey(e, "target", r.GetTarget())
	return e.Err()
}

// Validate checks the request's identity.
func (r *DeleteTargetRequest) Validate() error {
	e := &ValidationError{}
	validateKey(e, "target", r.GetTarget())
	return e.Err()
}

// MaxPageSize is the largest page ListTargets returns.
const MaxPageSize = 1000

// Validate checks the filter and the page size.
func (r *ListTargetsRequest) Validate() error {
	e := &ValidationError{}
	if r.GetNamespace() != "" && r.GetCluster() == "" {
		e.Add("namespace", "requires cluster")
	}
	if strings.HasPrefix(r.GetCluster(), "@") {
		e.Add("cluster", "must not start with '@' (reserved for the service's own records)")
	}
	if n := r.GetPageSize(); n < 0 || n > MaxPageSize {
		e.Add("page_size", "must be within [0, %d], got %d", MaxPageSize, n)
	}
	return e.Err()
}

// MaxDecisionsPageSize is the largest page ListDecisions returns.
const MaxDecisionsPageSize = 5000

// Validate checks the target, the time range and the page size.
func (r *ListDecisionsRequest) Validate() error {
	e := &ValidationError{}
	validateKey(e, "target", r.GetTarget())
	if ts := r.GetStartTime(); ts != nil && ts.CheckValid() != nil {
		e.Add("start_time", "must be a valid timestamp, between 0001-01-01 and 9999-12-31 UTC with nanos within [0, 1e9)")
	}
	if ts := r.GetEndTime(); ts != nil && ts.CheckValid() != nil {
		e.Add("end_time", "must be a valid timestamp, between 0001-01-01 and 9999-12-31 UTC with nanos within [0, 1e9)")
	}
	if r.GetStartTime() != nil && r.GetEndTime() != nil && r.GetStartTime().CheckValid() == nil && r.GetEndTime().CheckValid() == nil &&
		!r.GetEndTime().AsTime().After(r.GetStartTime().AsTime()) {
		e.Add("end_time", "must be after start_time")
	}
	if n := r.GetPageSize(); n < 0 || n > MaxDecisionsPageSize {
		e.Add("page_size", "must be within [0, %d], got %d", MaxDecisionsPageSize, n)
	}
	return e.Err()
}

// validateFleetKey checks a fleet key: namespace and name set, bounded, and
// free of '/' and NUL.
func validateFleetKey(e *ValidationError, field string, k *FleetKey) {
	if k == nil {
		e.Add(field, "must be set")
		return
	}
	validateNames(e, field, []struct{ name, value string }{{"namespace", k.Namespace}, {"name", k.Name}})
}

// Validate checks the fleet's identity and that a spec is set; the spec
// itself is checked when the server resolves it.
func (r *PutFleetRequest) Validate() error {
	e := &ValidationError{}
	validateFleetKey(e, "fleet", r.GetFleet())
	if r.GetSpec() == nil {
		e.Add("spec", "must be set")
	}
	return e.Err()
}

// Validate checks the fleet's identity.
func (r *GetFleetRequest) Validate() error {
	e := &ValidationError{}
	validateFleetKey(e, "fleet", r.GetFleet())
	return e.Err()
}

// Validate checks the fleet's identity.
func (r *DeleteFleetRequest) Validate() error {
	e := &ValidationError{}
	validateFleetKey(e, "fleet", r.GetFleet())
	return e.Err()
}

// Validate checks the filter and the page size.
func (r *ListFleetsRequest) Validate() error {
	e := &ValidationError{}
	if len(r.GetNamespace()) > maxNameLength || strings.ContainsAny(r.GetNamespace(), "\x00/") {
		e.Add("namespace", "must be at most %d bytes, without '/' or NUL", maxNameLength)
	}
	if n := r.GetPageSize(); n < 0 || n > MaxPageSize {
		e.Add("page_size", "must be within [0, %d], got %d", MaxPageSize, n)
	}
	return e.Err()
}

// Validate checks the fleet's identity, that a report is set and names
// its member, and that a member able to scale sends its scale; the rest is
// checked against the fleet's spec.
func (r *ReportRequest) Validate() error {
	e := &ValidationError{}
	validateFleetKey(e, "fleet", r.GetFleet())
	switch rep := r.GetReport(); {
	case rep == nil:
		e.Add("report", "must be set")
	case rep.GetMember() == "":
		e.Add("report.member", "must be set")
	case rep.GetScale() == nil && rep.GetCannotScale() == "":
		e.Add("report.scale", "must be set unless cannot_scale says why there is none")
	}
	return e.Err()
}

// Validate checks that a spec is set and seed_from, when set, names a
// fleet; the steps are checked when the server converts them.
func (r *SimulateFleetRequest) Validate() error {
	e := &ValidationError{}
	if r.GetSpec() == nil {
		e.Add("spec", "must be set")
	}
	if r.GetSeedFrom() != nil {
		validateFleetKey(e, "seed_from", r.GetSeedFrom())
	}
	return e.Err()
}
