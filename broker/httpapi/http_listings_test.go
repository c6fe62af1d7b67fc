package httpapi

import (
	"encoding/json"
	"testing"
)

// The OpenAPI document describes every listing route.
func TestOpenAPIDescribesListings(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/topics", "/v1/topics/{topic}", "/v1/topics/{topic}/hot-keys", "/v1/groups", "/v1/groups/{group}", "/v1/brokers", "/v1/brokers/{id}/health"} {
		if doc.Paths[path]["get"] == nil {
			t.Errorf("openapi.json has no GET %s", path)
		}
	}
}
