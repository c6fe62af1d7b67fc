package broker

// This file serves GET /v1/openapi.json, the description of the HTTP API.

import (
	_ "embed"
	"net/http"
)

//go:embed openapi.json
var openAPIDoc []byte

func (b *Broker) httpOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}
