package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kgo"
)

// startFlood opens n connections that each announce a frame of announce
// bytes and send sent bytes of it, then stall. They close at cleanup.
func startFlood(t *testing.T, b *Broker, n, announce, sent int) {
	t.Helper()
	payload := append(binary.BigEndian.AppendUint32(nil, uint32(announce)), make([]byte, sent)...)
	var wg sync.WaitGroup
	for range n {
		c := dialRaw(t, b, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.nc.Write(payload) // may block while the broker's budget is spent
		}()
	}
	t.Cleanup(wg.Wait) // the dialRaw cleanups (run first) close the connections
}

// heapInuse is the heap in use after a collection.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// produceAndConsume produces n records to topic and consumes them back.
func produceAndConsume(t *testing.T, b *Broker, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := testClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic))
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
}

// TestRequestMemoryFlood: connections that announce large frames and send
// part of them hold request memory for what they sent, not for what they
// announced: the broker's heap stays within its request budget, and another
// client still produces and consumes. (Before the budget, every announced
// frame was allocated whole at once: 40 x 15 MiB here.)
func TestRequestMemoryFlood(t *testing.T) {
	const (
		budget   = 16 << 20
		conns    = 40
		announce = 15 << 20
		sent     = 256 << 10
	)
	cfg := testBrokerConfig(t)
	cfg.QueuedMaxRequestBytes = budget
	b := startBroker(t, cfg)
	createTopic(t, testClient(t, b), "flood", 1, nil)
	before := heapInuse()

	startFlood(t, b, conns, announce, sent)
	brokertest.Eventually(t, 30*time.Second, "the flood's bytes read", func() bool {
		return metricValue(t, b, "sluice_request_memory_bytes") >= conns*sent
	})
	produceAndConsume(t, b, "flood", 100)

	after := heapInuse()
	limit := uint64(budget + announce + 16<<20) // the budget, its one overdraft, a margin
	t.Logf("heap in use %d MiB before the flood, %d MiB during it; request memory %.0f MiB",
		before>>20, after>>20, metricValue(t, b, "sluice_request_memory_bytes")/(1<<20))
	if after > before+limit {
		t.Fatalf("heap in use grew by %d MiB during the flood; the request budget allows %d MiB", (after-before)>>20, limit>>20)
	}
}

// TestRequestMemoryFloodRecovers: a flood that spends the whole budget and
// stalls stops the broker reading requests only until the idle timeout
// closes the stalled connections; then other clients go on.
func TestRequestMemoryFloodRecovers(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.QueuedMaxRequestBytes = 4 << 20
	cfg.ConnectionsMaxIdle = time.Second
	b := startBroker(t, cfg)
	createTopic(t, testClient(t, b), "recover", 1, nil)

	startFlood(t, b, 8, 3<<20, 1<<20)
	brokertest.Eventually(t, 30*time.Second, "the budget spent", func() bool {
		return metricValue(t, b, "sluice_request_memory_bytes") >= 4<<20
	})
	produceAndConsume(t, b, "recover", 10)
	if n := metricValue(t, b, "sluice_connections_idle_closed_total"); n < 1 {
		t.Fatalf("%v idle connections closed; the flood's should have been", n)
	}
}

// TestSlowReceiveClosed: a connection that announces a frame and then sends
// nothing more is closed once a window of the minimum receive rate ends, its
// request memory comes back, and it is counted as slow_receive; a connection
// with no partial frame is left to the idle timeout, and a client that sends
// its requests whole goes on.
func TestSlowReceiveClosed(t *testing.T) {
	const window = 500 * time.Millisecond
	cfg := testBrokerConfig(t)
	cfg.MinReceiveRate = 1 << 10
	cfg.MinReceiveWindow = window
	b := startBroker(t, cfg)
	createTopic(t, testClient(t, b), "loris", 1, nil)

	idle := dialRaw(t, b, "")
	idle.apiVersions() // a whole request, then nothing: idle, not slow
	loris := dialRaw(t, b, "")
	if _, err := loris.nc.Write(append(binary.BigEndian.AppendUint32(nil, 1<<20), make([]byte, 100)...)); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, "the partial frame reserved", func() bool {
		return metricValue(t, b, "sluice_request_memory_bytes") > 0
	})
	loris.waitClosed(10 * window) // one window, and the time to see it
	if n := metricValue(t, b, "sluice_connections_closed_total", "reason", "slow_receive"); n != 1 {
		t.Fatalf("sluice_connections_closed_total{reason=slow_receive} = %v, want 1", n)
	}
	brokertest.Eventually(t, 10*time.Second, "the slow frame counted against its share", func() bool {
		return metricValue(t, b, "sluice_tenant_rejections_total", "reason", "slow_receive") == 1
	})
	brokertest.Eventually(t, 10*time.Second, "the slow frame's memory returned", func() bool {
		return metricValue(t, b, "sluice_request_memory_bytes") == 0
	})
	produceAndConsume(t, b, "loris", 10)
	idle.apiVersions()
	if n := metricValue(t, b, "sluice_connections_closed_total", "reason", "slow_receive"); n != 1 {
		t.Fatalf("sluice_connections_closed_total{reason=slow_receive} = %v after the others went on, want 1", n)
	}
	if n := metricValue(t, b, "sluice_tenant_rejections_total", "reason", "slow_receive"); n != 1 {
		t.Fatalf("sluice_tenant_rejections_total{reason=slow_receive} = %v after the others went on, want 1", n)
	}
}

// TestSlowReceiveDrainsFlood: a flood of half-sent frames larger than the
// request memory, with the minimum receive rate on: frames that wait for
// memory are not measured, each frame that stalls while reading is closed,
// and in the end every flood connection is closed and all of its memory is
// back, without the idle timeout.
func TestSlowReceiveDrainsFlood(t *testing.T) {
	const conns = 8
	cfg := testBrokerConfig(t)
	cfg.QueuedMaxRequestBytes = 4 << 20
	cfg.MinReceiveRate = 1 << 10
	cfg.MinReceiveWindow = 300 * time.Millisecond
	b := startBroker(t, cfg)

	startFlood(t, b, conns, 3<<20, 1<<20)
	brokertest.Eventually(t, 60*time.Second, "every flood connection closed for its receive rate", func() bool {
		return metricValue(t, b, "sluice_connections_closed_total", "reason", "slow_receive") == conns
	})
	brokertest.Eventually(t, 10*time.Second, "the flood's memory returned", func() bool {
		return metricValue(t, b, "sluice_request_memory_bytes") == 0
	})
	if n := metricValue(t, b, "sluice_connections_idle_closed_total"); n != 0 {
		t.Fatalf("%v connections closed as idle; the flood's were slow", n)
	}
}
