package broker

// This file owns the HTTP endpoints: /metrics, /healthz and /readyz. The
// JSON API of DESIGN.md §7 joins them here.

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func (b *Broker) httpHandler() http.Handler {
	b.m.reg.MustRegister(newOffsetCollector(b), newLagCollector(b))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(b.m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !b.ready.Load() {
			http.Error(w, "not ready\n", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	b.registerAPI(mux)
	return mux
}
