package httpapi

// This file owns the operator routes' hook (adminapi) and the forwarding to the controller elections need.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"

	"github.com/sluice-mq/sluice/broker/httpapi/adminapi"
	"github.com/sluice-mq/sluice/meta"
)

func (b *Server) registerAdminAPI(mux routeMux) {
	adminapi.New(adminBackend{b}, b.Logger).WithReassign(b.Cluster).Register(mux) // b.Cluster: reassignments
}

// adminBackend is adminapi.Backend over a Server.
type adminBackend struct{ *Server }

func (a adminBackend) Topic(name string) ([16]byte, int, bool) {
	tp := a.LookupTopic(name)
	if tp == nil {
		return [16]byte{}, 0, false
	}
	return tp.Meta.ID, len(tp.States), true
}

func (a adminBackend) KnownBroker(id int32) bool {
	if slices.ContainsFunc(a.Brokers(), func(bi meta.BrokerInfo) bool { return bi.NodeID == id }) {
		return true
	}
	for _, t := range a.SortedTopics() {
		for _, st := range t.States {
			if slices.Contains(st.Replicas, id) {
				return true
			}
		}
	}
	return false
}

func (a adminBackend) SetDraining(ctx context.Context, id int32, on bool) error {
	return a.Store.SetDraining(ctx, id, on)
}

func (a adminBackend) ForwardToController(w http.ResponseWriter, r *http.Request) {
	a.forwardToController(w, r)
}

func (a adminBackend) DecodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeJSON(w, r, v)
}

func (a adminBackend) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	a.writeError(w, r, err)
}

func (a adminBackend) NodeID() int32 { return a.Cfg.NodeID }

// forwardToController proxies r once to the controller's HTTP API (a forwarded r finding no elector is refused).
func (b *Server) forwardToController(w http.ResponseWriter, r *http.Request) {
	ctrl := b.ControllerID()
	addr := ""
	for _, bi := range b.Brokers() {
		if bi.NodeID == ctrl {
			addr = bi.HTTP
		}
	}
	if ctrl < 0 || ctrl == b.Cfg.NodeID || addr == "" || r.Header.Get(forwardedHeader) != "" {
		b.writeError(w, r, &APIError{Status: http.StatusServiceUnavailable, Code: "controller_not_available",
			Message: fmt.Sprintf("no running controller reachable from node %d (controller %d); retry", b.Cfg.NodeID, ctrl)})
		return
	}
	target := b.peerURL(addr)
	proxy := &httputil.ReverseProxy{
		Transport: b.peerTransport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(forwardedHeader, strconv.Itoa(int(b.Cfg.NodeID)))
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			b.writeError(w, r, &APIError{Status: http.StatusServiceUnavailable, Code: "controller_unreachable",
				Message: fmt.Sprintf("forward to the controller, node %d at %s: %v; retry", ctrl, addr, err)})
		},
	}
	proxy.ServeHTTP(w, r)
}
