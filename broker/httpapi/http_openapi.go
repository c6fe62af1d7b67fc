package httpapi

// This file serves GET /v1/openapi.json, the description of the HTTP API.

import (
	_ "embed"
	"net/http"
)

//go:embed openapi.json
var OpenAPIDoc []byte

func (b *Server) httpOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPIDoc)
}
