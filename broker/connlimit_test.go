package broker

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/node"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConnectionLimits: with small limits the connection over the total or
// over its IP's limit is closed at accept and counted by reason, the others
// are served, and a closed connection frees its place.
func TestConnectionLimits(t *testing.T) {
	for _, tt := range []struct {
		name            string
		max, maxPerIP   int
		admitted        []string // local IPs of connections the broker serves
		refused, reason string   // then one more, refused for reason
		alsoAdmitted    string   // then one from this IP, served
	}{
		{name: "max connections", max: 2, admitted: []string{"127.0.0.1", "127.0.0.2"},
			refused: "127.0.0.3", reason: node.RefusedMaxConnections},
		{name: "max connections per ip", max: 10, maxPerIP: 2, admitted: []string{"127.0.0.1", "127.0.0.1"},
			refused: "127.0.0.1", reason: node.RefusedMaxPerIP, alsoAdmitted: "127.0.0.2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testBrokerConfig(t)
			cfg.MaxConnections, cfg.MaxConnectionsPerIP = tt.max, tt.maxPerIP
			b := startBroker(t, cfg)
			var open []*rawConn
			for _, ip := range tt.admitted {
				c := dialRaw(t, b, ip)
				c.apiVersions()
				open = append(open, c)
			}
			dialRaw(t, b, tt.refused).waitClosed(30 * time.Second)
			if tt.alsoAdmitted != "" {
				dialRaw(t, b, tt.alsoAdmitted).apiVersions()
			}
			if got := metricValue(t, b, "sluice_connections_refused_total", "reason", tt.reason); got != 1 {
				t.Fatalf("refused_total{reason=%q} = %v, want 1", tt.reason, got)
			}
			wantOpen := float64(len(tt.admitted))
			if tt.alsoAdmitted != "" {
				wantOpen++
			}
			brokertest.Eventually(t, 10*time.Second, "open connections gauge", func() bool {
				return metricValue(t, b, "sluice_connections_open") == wantOpen
			})

			// A closed connection frees its place for the refused IP.
			open[0].nc.Close()
			brokertest.Eventually(t, 30*time.Second, "a connection admitted after one closed", func() bool {
				c := dialRaw(t, b, tt.refused)
				defer c.nc.Close()
				return c.tryRoundTrip(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse(), 10*time.Second) == nil
			})
		})
	}
}

// TestIdleConnections: a connection with no request in flight that sends
// nothing for ConnectionsMaxIdle is closed and counted, whether it is quiet
// between requests or stalled halfway through one; a long-poll fetch that
// outlasts the idle time is not idle.
func TestIdleConnections(t *testing.T) {
	const idle = 500 * time.Millisecond
	cfg := testBrokerConfig(t)
	cfg.ConnectionsMaxIdle = idle
	b := startBroker(t, cfg)
	createTopic(t, testClient(t, b), "idle", 1, nil)

	t.Run("long poll", func(t *testing.T) {
		c := dialRaw(t, b, "")
		req := fetchReq(b, "idle", 0, int32(4*idle/time.Millisecond), 1, 1<<20, 1<<20)
		req.SetVersion(12)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.SetVersion(12)
		start := time.Now()
		c.roundTrip(req, resp)
		if took := time.Since(start); took < 2*idle {
			t.Fatalf("the fetch answered after %v, before it could outlast the idle time %v", took, idle)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("long poll: error code %d", code)
		}
		c.apiVersions() // the connection is still open
	})
	t.Run("parked join", func(t *testing.T) {
		// a joins and becomes the leader; b's join then waits for a to
		// rejoin, which it never does, until a's rebalance timeout. b's
		// reader meanwhile waits for its next request with one in flight.
		join := func(c *rawConn) (*kmsg.JoinGroupResponse, time.Duration) {
			req := kmsg.NewPtrJoinGroupRequest()
			req.SetVersion(3)
			req.Group, req.ProtocolType = "idle-group", "consumer"
			req.SessionTimeoutMillis = int32(cfg.Coordinator.MinSessionTimeout / time.Millisecond)
			req.RebalanceTimeoutMillis = int32(6 * idle / time.Millisecond)
			req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0}}}
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.SetVersion(3)
			start := time.Now()
			c.roundTrip(req, resp)
			return resp, time.Since(start)
		}
		if resp, _ := join(dialRaw(t, b, "")); resp.ErrorCode != 0 {
			t.Fatalf("first join: error code %d", resp.ErrorCode)
		}
		c := dialRaw(t, b, "")
		resp, took := join(c)
		if took < 2*idle {
			t.Fatalf("the second join answered after %v, before it could outlast the idle time %v", took, idle)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("second join: error code %d", resp.ErrorCode)
		}
		c.apiVersions() // the connection is still open
	})
	for _, tt := range []struct {
		name string
		send []byte
	}{
		{"quiet between requests", nil},
		{"stalled halfway through a request", append(brokertest.EncodeRequest(kmsg.NewPtrApiVersionsRequest(), 1)[:4], 0, 1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := metricValue(t, b, "sluice_connections_idle_closed_total")
			c := dialRaw(t, b, "")
			c.apiVersions()
			if _, err := c.nc.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			c.waitClosed(30 * time.Second)
			brokertest.Eventually(t, 10*time.Second, "idle_closed_total counted", func() bool {
				return metricValue(t, b, "sluice_connections_idle_closed_total") == before+1
			})
		})
	}
}
