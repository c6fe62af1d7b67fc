package broker

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startExternalEtcd runs a three-member etcd cluster of its own, outside any
// broker, and returns its client URLs.
func startExternalEtcd(t *testing.T) []string {
	t.Helper()
	type member struct{ client, peer string }
	ms := make([]member, 3)
	var initial []string
	for i := range ms {
		ms[i] = member{client: freeAddr(t), peer: freeAddr(t)}
		initial = append(initial, fmt.Sprintf("e%d=http://%s", i, ms[i].peer))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ms))
	for i, m := range ms {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("e%d", i)
		cfg.Dir = t.TempDir()
		cfg.Logger = "zap"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.ListenClientUrls = []url.URL{{Scheme: "http", Host: m.client}}
		cfg.AdvertiseClientUrls = cfg.ListenClientUrls
		cfg.ListenPeerUrls = []url.URL{{Scheme: "http", Host: m.peer}}
		cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "sluice-external-test"
		cfg.ListenMetricsUrls = nil
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := embed.StartEtcd(cfg)
			if err != nil {
				errs[i] = err
				return
			}
			t.Cleanup(e.Close)
			select {
			case <-e.Server.ReadyNotify():
			case err := <-e.Err():
				errs[i] = err
			case <-time.After(60 * time.Second):
				errs[i] = fmt.Errorf("etcd member %d not ready", i)
			}
		}()
	}
	wg.Wait()
	var endpoints []string
	for i, err := range errs {
		if err != nil {
			t.Fatalf("etcd member %d: %v", i, err)
		}
		endpoints = append(endpoints, "http://"+ms[i].client)
	}
	return endpoints
}

// TestClusterOnExternalEtcd runs three brokers against an etcd cluster they
// do not embed (--etcd-endpoints): they register, elect a controller and
// leaders, and serve a replicated topic.
func TestClusterOnExternalEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster and three brokers")
	}
	endpoints := startExternalEtcd(t)
	c := &testCluster{brokers: make([]*Broker, 3), stops: make([]func(), 3)}
	for i := range 3 {
		cfg := testBrokerConfig(t)
		cfg.KafkaListen, cfg.HTTPListen = "127.0.0.1:0", "127.0.0.1:0"
		cfg.NodeID, cfg.AZ = int32(i+1), string(rune('a'+i))
		cfg.Meta.Endpoints = endpoints
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
				awaitStop(t, errc, fmt.Sprintf("broker %d", i+1))
			})
		}
		t.Cleanup(stop)
		select {
		case <-b.Ready():
		case err := <-errc:
			t.Fatalf("broker %d stopped before it was ready: %v", i+1, err)
		case <-time.After(60 * time.Second):
			t.Fatalf("broker %d not ready", i+1)
		}
		c.brokers[i], c.stops[i] = b, stop
	}
	eventuallyTrue(t, "the brokers see each other", func() (bool, string) {
		for i, b := range c.brokers {
			if n := len(b.Brokers()); n != 3 {
				return false, fmt.Sprintf("broker %d sees %d", i+1, n)
			}
		}
		return true, ""
	})
	// All three share one cluster id: the external etcd's.
	for _, b := range c.brokers[1:] {
		if b.ClusterID != c.brokers[0].ClusterID {
			t.Fatalf("cluster ids %s and %s", b.ClusterID, c.brokers[0].ClusterID)
		}
	}
	cl := testClient(t, c.brokers[2])
	createReplicatedTopic(t, cl, "ext", 3, 3)
	const n = 100
	produceAll(t, c, "ext", n)
	if seen := consumeAll(t, c, "ext", n); len(seen) != n {
		t.Fatalf("read back %d of %d", len(seen), n)
	}
}
