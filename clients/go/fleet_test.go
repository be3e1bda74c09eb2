package setpointclient_test

import (
	"errors"
	"testing"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
)

func TestParseFleetKey(t *testing.T) {
	k, err := setpointclient.ParseFleetKey("shop/web")
	if err != nil || setpointclient.FleetKeyString(k) != "shop/web" {
		t.Errorf("ParseFleetKey(shop/web) = %v, %v", k, err)
	}
	for _, s := range []string{"", "web", "shop/", "/web", "dev/shop/web"} {
		if _, err := setpointclient.ParseFleetKey(s); !errors.Is(err, setpointclient.ErrBadKey) {
			t.Errorf("ParseFleetKey(%q) = %v, want ErrBadKey", s, err)
		}
	}
}
