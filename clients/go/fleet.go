package setpointclient

import (
	"context"
	"fmt"
	"iter"
	"strings"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// FleetKey returns the key of the fleet name in namespace.
func FleetKey(namespace, name string) *setpointv1.FleetKey {
	return &setpointv1.FleetKey{Namespace: namespace, Name: name}
}

// ParseFleetKey parses "NAMESPACE/NAME", the form FleetKeyString prints; an
// error for any other form matches ErrBadKey and shows the expected one.
func ParseFleetKey(s string) (*setpointv1.FleetKey, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return nil, &callError{fmt.Sprintf("%q is not a fleet: a fleet is NAMESPACE/NAME, e.g. shop/web (the namespace its workload runs in, in every member cluster, and the fleet's name)", s), nil, ErrBadKey}
	}
	return FleetKey(parts[0], parts[1]), nil
}

// FleetKeyString formats k as "NAMESPACE/NAME".
func FleetKeyString(k *setpointv1.FleetKey) string {
	return k.GetNamespace() + "/" + k.GetName()
}

// Fleet returns what the service keeps for one fleet: its spec, status,
// last decision, history, last split and members.
func (c *Client) Fleet(ctx context.Context, key *setpointv1.FleetKey) (*setpointv1.Fleet, error) {
	resp, err := c.GetFleet(ctx, &setpointv1.GetFleetRequest{Fleet: key})
	if err != nil {
		return nil, err
	}
	return resp.GetFleet(), nil
}

// Fleets iterates over every fleet req selects (the ones the caller may
// read), calling ListFleets page after page (req.PageSize per page,
// req.PageToken to start from; req is not modified). An error ends the
// iteration after being yielded once.
func (c *Client) Fleets(ctx context.Context, req *setpointv1.ListFleetsRequest) iter.Seq2[*setpointv1.Fleet, error] {
	return func(yield func(*setpointv1.Fleet, error) bool) {
		page := &setpointv1.ListFleetsRequest{Namespace: req.GetNamespace(), PageSize: req.GetPageSize(), PageToken: req.GetPageToken()}
		for {
			resp, err := c.ListFleets(ctx, page)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, f := range resp.GetFleets() {
				if !yield(f, nil) {
					return
				}
			}
			if resp.GetNextPageToken() == "" {
				return
			}
			page.PageToken = resp.GetNextPageToken()
		}
	}
}

// Share returns member's share in split, nil when split has none.
func Share(split *setpointv1.FleetSplit, member string) *setpointv1.FleetShare {
	for _, s := range split.GetShares() {
		if s.GetMember() == member {
			return s
		}
	}
	return nil
}
