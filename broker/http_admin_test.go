package broker

import (
	"net/http"
	"testing"
)

// The admin API's unclean election reaches the controller's elector (here
// the lone broker's own) and refuses what names no partition.
func TestHTTPElectUnclean(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	createTopic(t, testClient(t, b), "adm", 2, nil)
	base := "http://" + b.Cfg.HTTPListen + "/v1/admin/partitions/"
	for _, tc := range []struct {
		path string
		want int
	}{
		{"adm/1/elections:unclean", http.StatusAccepted},
		{"adm/2/elections:unclean", http.StatusNotFound},
		{"nope/0/elections:unclean", http.StatusNotFound},
		{"adm/x/elections:unclean", http.StatusBadRequest},
	} {
		resp, err := http.Post(base+tc.path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("POST %s: %d, want %d", tc.path, resp.StatusCode, tc.want)
		}
	}
}
