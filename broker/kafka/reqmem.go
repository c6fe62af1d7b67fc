package kafka

// This file owns the broker's side of request memory and frame reading
// (package frames): which share a connection's next frame is charged to,
// and the frame reader built from this broker's config, whose slow-receive
// callback counts the connection and closes it.
//
// Invariant: a connection closed for its receive rate is counted in
// sluice_connections_closed_total{reason="slow_receive"} before it closes,
// so whoever sees the close sees the count.

import (
	"io"
	"net"

	"github.com/sluice-mq/sluice/broker/kafka/frames"
	"github.com/sluice-mq/sluice/broker/node"
)

// The shares of request memory that are not tenants. Their names cannot be
// tenant names, which are DNS-style labels.
const (
	shareUnauthenticated = "(unauthenticated)"
	shareInterBroker     = "(inter-broker)"
)

// memShare is the share of request memory a connection's next frame is
// charged to, from what the connection's security state knows now.
func memShare(sec *connSecurity) string {
	if sec.listener == "" {
		return shareInterBroker
	}
	id, ok := sec.identity()
	if !ok {
		return shareUnauthenticated
	}
	return id.Principal.Tenant
}

// newFrameReader reads nc's frames from src (nc as the idle timeout reads
// it).
func (b *Server) newFrameReader(nc net.Conn, src io.Reader, mem *frames.Memory) *frames.Reader {
	return frames.NewReader(src, mem, b.Cfg.MaxRequestBytes, b.Cfg.MinReceiveRate, b.Cfg.MinReceiveWindow, func() {
		b.M.ConnsClosed.WithLabelValues(node.ClosedSlowReceive).Inc()
		_ = nc.Close() // the reader reports frames.ErrSlowReceive
	})
}
