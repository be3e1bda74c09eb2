package setpointclient

import (
	"testing"

	"github.com/setpointhq/setpoint/server"
)

func TestRevisionHeaderIsTheServers(t *testing.T) {
	if revisionHeader != server.RevisionHeader {
		t.Errorf("revisionHeader = %q, the server sends %q", revisionHeader, server.RevisionHeader)
	}
}
