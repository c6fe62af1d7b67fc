package httpapi

// This file owns the HTTP endpoints: /metrics, /healthz, /readyz and
// /debug/pprof/. The JSON API (http_api.go) and the security admin API
// (secapi) join them here, behind the request pipeline (pipeline.go). /readyz is 200
// once the broker serves Kafka and HTTP and its object store passed its
// probe; otherwise 503 with the reason, as JSON (code not_ready).

import (
	"context"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/broker/httpapi/objapi"
	"github.com/sluice-mq/sluice/broker/httpapi/queueapi"
	"github.com/sluice-mq/sluice/broker/httpapi/secapi"
	"github.com/sluice-mq/sluice/broker/node"
)

func (b *Server) httpHandler() http.Handler {
	b.M.Reg.MustRegister(node.NewOffsetCollector(b.Node), newLagCollector(b), node.NewTierCollector(b.Node))
	b.M.Reg.MustRegister(queueapi.NewDLQCollector(queueapi.DLQDepths(b.Node)), queueapi.NewPausedCollector(b.queue), b.queue.CopyMetrics())
	mux := routeMux{b: b, mux: http.NewServeMux(), seen: map[string]bool{}}
	mux.Handle("GET /metrics", promhttp.HandlerFor(b.M.Reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	// Not ready is an API error like any other (not_ready), written but
	// not logged: probes ask every few seconds, and the cause is logged
	// where it arises.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		why := "not ready: the broker does not serve Kafka and HTTP yet (starting) or any more (stopping)"
		if b.Serving() {
			// An object store the broker cannot use keeps it out of a load
			// balancer, with the store's own answer (tiering_probe.go).
			if why = b.StoreNotReady(); why == "" {
				_, _ = w.Write([]byte("ready\n"))
				return
			}
			why = "not ready: " + why
		}
		apierr.Write(w, &APIError{Status: http.StatusServiceUnavailable, Code: "not_ready", Message: why})
	})
	// Profiles for operators (and BENCHMARKS.md): CPU, heap, goroutines.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	b.registerAPI(mux)
	// The security admin API, on a mux of its own that each of its routes
	// reaches through the pipeline.
	sec := http.NewServeMux()
	secapi.Register(sec, secapi.Deps{Store: b.Store, Logger: b.Logger})
	for _, pattern := range secapiRoutes {
		mux.Handle(pattern, sec)
	}
	// Large payloads (objapi), likewise; without a service (no object
	// store that can take them) its routes answer 501.
	obj := http.NewServeMux()
	if b.objects != nil {
		objapi.Register(obj, objapi.Deps{Service: b.objects, Logger: b.Logger,
			TopicExists: func(_ context.Context, topic string) bool { return b.LookupTopic(topic) != nil }})
	} else {
		for _, pattern := range objapi.Routes {
			obj.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
				b.writeError(w, r, &APIError{Status: http.StatusNotImplemented, Code: "not_implemented",
					Message: "this broker has no object store for large payloads"})
			})
		}
	}
	for _, pattern := range objapi.Routes {
		mux.Handle(pattern, obj)
	}
	p := pipeline{b: b, mux: mux.mux}
	b.registerConsole(mux, p) // console.go
	mux.checkAllRegistered()
	return p
}
