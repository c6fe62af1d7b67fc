package httpapi

// This file owns the HTTP API's administrative operations:
//
//	POST /v1/admin/partitions/{topic}/{partition}/elections:unclean
//	     202: the controller forces an unclean election of the partition
//	     404: no such topic or partition; 503: no controller reachable (retry)
//
// An unclean election is the operator's way out of a partition that stays
// offline because too many of its replicas lost their disks (elector.go):
// the most complete log among the replicas that answer the next fence
// becomes the leader's, and whatever only the lost replicas held is gone.
// Any broker takes the request and forwards it to the controller.
//
// Invariant: nothing here forces an election by itself; it only asks the
// controller's elector loop, which owns the partition's election core.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/broker/node"
)

// forceWait bounds the wait for the elector loop to take a request.
const forceWait = 5 * time.Second

// forceResponse is the 202 answer.
type forceResponse struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Controller int32  `json:"controller"`
	Message    string `json:"message"`
}

func (b *Server) registerAdminAPI(mux routeMux) {
	mux.HandleFunc("POST /v1/admin/partitions/{topic}/{partition}/elections:unclean", b.httpElectUnclean)
}

func (b *Server) httpElectUnclean(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	n, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || n < 0 {
		b.writeError(w, r, BadRequest("partition %q is not a partition number", r.PathValue("partition")))
		return
	}
	tp := b.LookupTopic(name)
	if tp == nil || int(n) >= len(tp.States) {
		b.writeError(w, r, &APIError{Status: http.StatusNotFound, Code: "unknown_topic_or_partition",
			Message: fmt.Sprintf("no partition %s-%d", name, n)})
		return
	}
	key := node.PartitionKey{TopicID: tp.Meta.ID, Partition: int32(n)}
	ctx, cancel := context.WithTimeout(r.Context(), forceWait)
	defer cancel()
	handled, err := b.ForceUnclean(ctx, key)
	switch {
	case !handled:
		b.forwardToController(w, r)
		return
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		b.writeError(w, r, &APIError{Status: http.StatusServiceUnavailable, Code: "controller_busy",
			Message: "the elector did not answer in time; retry"})
		return
	case err != nil:
		b.writeError(w, r, &APIError{Status: http.StatusServiceUnavailable, Code: "unknown_to_controller",
			Message: fmt.Sprintf("partition %s-%d: %v; retry", name, key.Partition, err)})
		return
	}
	b.Logger.Warn().Str("topic", name).Int32("partition", key.Partition).Str("remote", r.RemoteAddr).
		Msg("unclean election requested over the admin API")
	writeJSON(w, http.StatusAccepted, forceResponse{Topic: name, Partition: key.Partition, Controller: b.Cfg.NodeID,
		Message: "unclean election forced: the next fence round elects the most complete log among the replicas that answer"})
}

// forwardToController proxies the request to the controller's HTTP API,
// once (a forwarded request that finds no elector is refused).
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
