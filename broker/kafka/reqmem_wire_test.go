package kafka_test

// The request memory shared between tenants, over real sockets: a flood of
// half-sent frames from unauthenticated connections costs only its sender.

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/kafka"
)

// gauge is the value of sb's unlabelled gauge name.
func gauge(t *testing.T, sb *secureBroker, name string) float64 {
	t.Helper()
	mfs, err := sb.M.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// floodHalfFrames opens n connections to addr that each announce a frame of
// announce bytes, send sent bytes of it and stall. They close at cleanup.
func floodHalfFrames(t *testing.T, addr string, n, announce, sent int) {
	t.Helper()
	payload := append(binary.BigEndian.AppendUint32(nil, uint32(announce)), make([]byte, sent)...)
	var wg sync.WaitGroup
	for range n {
		nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = nc.Write(payload) // blocks while the broker does not read it; ends at the close
		}()
		t.Cleanup(func() { nc.Close() })
	}
	t.Cleanup(func() { brokertest.WaitGroupWithin(t, &wg, 30*time.Second, "the flood's writers") })
}

// TestRequestMemoryFloodSparesOtherTenants: unauthenticated connections on
// the PLAINTEXT listener announce frames as large as the whole request
// memory and send part of them, far more than the memory in all; a SCRAM
// tenant on the SASL_SSL listener keeps producing throughout, every
// produce answered within 2s, and a new SCRAM connection logs in and
// produces while the flood holds the memory. (With one queue for every
// connection, the tenant waited behind the flood for as long as it stayed
// open.)
func TestRequestMemoryFloodSparesOtherTenants(t *testing.T) {
	const (
		budget   = 8 << 20
		conns    = 24
		announce = budget
		sent     = 1 << 20
		bound    = 2 * time.Second
	)
	sb := startSecureBroker(t, func(c *broker.Config) {
		c.QueuedMaxRequestBytes = budget
		c.MinReceiveRate = 0 // the flood is held by the shares alone, not closed
	}, kafka.WithCredentials(testUsers.lookup(t)))
	login := []kgo.Opt{
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.DialTLSConfig(sb.pki.clientTLS(t, false)),
		kgo.DefaultProduceTopic("quiet"),
	}
	quiet := sb.client(t, "SASL_SSL", login...)
	// produceWithin produces one record and waits at most bound for its
	// acknowledgement (a buffered record's context does not end its wait).
	produceWithin := func(cl *kgo.Client, i int) error {
		done := make(chan error, 1)
		cl.Produce(context.Background(), &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}, func(_ *kgo.Record, err error) { done <- err })
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("produce %d: %w", i, err)
			}
			return nil
		case <-time.After(bound):
			return fmt.Errorf("produce %d not answered within %v", i, bound)
		}
	}
	// The topic exists and the client is connected before the flood.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := quiet.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cancel()

	// The quiet tenant produces one record after another from now on.
	var produced atomic.Int64
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			if err := produceWithin(quiet, i); err != nil {
				errc <- err
				return
			}
			produced.Add(1)
		}
	}()
	stopProducer := func() {
		close(stop)
		if err := brokertest.RecvWithin(t, errc, 10*time.Second, "the quiet producer to stop"); err != nil {
			t.Fatal(err)
		}
	}

	floodHalfFrames(t, sb.addr["PLAINTEXT"], conns, announce, sent)
	brokertest.Eventually(t, 30*time.Second, "the flood holding the request memory", func() bool {
		return gauge(t, sb, "sluice_request_memory_bytes") >= budget
	})
	at := produced.Load()
	brokertest.Eventually(t, 30*time.Second, "50 produces during the flood", func() bool {
		select {
		case err := <-errc:
			t.Fatal(err)
		default:
		}
		return produced.Load() >= at+50
	})

	// A new connection of the tenant authenticates (its SASL frames are
	// charged to the unauthenticated share, not the flood's) and produces.
	fresh := sb.client(t, "SASL_SSL", login...)
	for i := range 5 {
		if err := produceWithin(fresh, i); err != nil {
			t.Fatalf("a new connection during the flood: %v", err)
		}
	}
	stopProducer()
	if got := gauge(t, sb, "sluice_request_memory_bytes"); got < budget {
		t.Fatalf("request memory %v during the flood, want the flood still holding at least %d", got, budget)
	}
}
