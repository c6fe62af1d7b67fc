package broker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testBrokerConfig is a lone broker in a temporary directory on free ports.
func testBrokerConfig(t testing.TB) Config { return brokertest.Config(t) }

func freeAddr(t testing.TB) string { return brokertest.FreeAddr(t) }

// startBroker runs a broker in-process until the test ends and returns it
// once it answers Kafka requests.
func startBroker(t testing.TB, cfg Config) *Broker {
	t.Helper()
	b, _ := startStoppableBroker(t, cfg)
	return b
}

// startStoppableBroker is startBroker that also returns a stop function
// (run at cleanup too; stopping twice is harmless), for restart tests. A
// port picked free can be taken before the broker binds it (other test
// processes run at once): it starts again on fresh ports when that happens.
func startStoppableBroker(t testing.TB, cfg Config) (*Broker, func()) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		b, stop, err := tryStartBroker(t, cfg)
		if err == nil {
			return b, stop
		}
		if !strings.Contains(err.Error(), "address already in use") || attempt == 3 {
			t.Fatalf("broker stopped before it was ready: %v", err)
		}
		t.Logf("attempt %d: %v; starting again on fresh ports", attempt, err)
		cfg.KafkaListen, cfg.HTTPListen = freeAddr(t), freeAddr(t)
		cfg.Meta.ListenClient, cfg.Meta.ListenPeer = freeAddr(t), freeAddr(t)
	}
}

func tryStartBroker(t testing.TB, cfg Config) (*Broker, func(), error) {
	t.Helper()
	b, err := New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			awaitStop(t, errc, "broker")
		})
	}
	select {
	case <-b.Ready():
	case err := <-errc:
		cancel()
		return nil, nil, err
	case <-time.After(60 * time.Second):
		t.Cleanup(stop)
		t.Fatal("broker not ready after 60s")
	}
	t.Cleanup(stop)
	return b, stop, nil
}

// testClient is a franz-go client of b, closed when the test ends.
func testClient(t testing.TB, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.KafkaAddr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic through the Kafka protocol and fails the test
// on any error code.
func createTopic(t testing.TB, cl *kgo.Client, name string, partitions int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create topic %s: error %d", name, code)
	}
}
