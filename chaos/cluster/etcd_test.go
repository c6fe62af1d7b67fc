package cluster_test

// etcd_test.go runs a cluster on its own etcd server (Config.ExternalEtcd)
// and cuts one broker's link to etcd: the broker's registration lease
// expires, the other brokers' Metadata stops listing it, and once the link
// heals it registers again and is listed again.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/chaos/cluster"
	"github.com/sluice-mq/sluice/chaos/netproxy"
)

func TestConfigValidate(t *testing.T) {
	base := cluster.Config{Dir: "d", Sluiced: "s", VersityGW: "v"}
	for _, tc := range []struct {
		name   string
		change func(*cluster.Config)
		ok     bool
	}{
		{"plain", func(*cluster.Config) {}, true},
		{"external etcd", func(c *cluster.Config) { c.ExternalEtcd = true }, true},
		{"tmpfs on external etcd", func(c *cluster.Config) { c.ExternalEtcd, c.DataDirBytes = true, 64<<20 }, true},
		{"tmpfs with embedded etcd", func(c *cluster.Config) { c.DataDirBytes = 64 << 20 }, false},
		{"negative tmpfs", func(c *cluster.Config) { c.ExternalEtcd, c.DataDirBytes = true, -1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.change(&cfg)
			if err := cfg.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestExternalEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sluiced processes, versitygw and an etcd server")
	}
	if binErr != nil {
		t.Fatal(binErr)
	}
	const topic = "ext"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	begin := time.Now()
	c := startCluster(ctx, t, cluster.Config{ExternalEtcd: true})
	t.Logf("cluster on its own etcd ready in %v", time.Since(begin).Round(time.Millisecond))

	// Each broker holds its etcd connection through its own proxy.
	for id := int32(1); id <= cluster.Size; id++ {
		p := c.EtcdProxy(id)
		if p == nil {
			t.Fatalf("EtcdProxy(%d) is nil", id)
		}
		if st := p.Stats(); st.Accepted == 0 || st.Active == 0 {
			t.Fatalf("broker %d's etcd proxy %s: %+v; the broker does not reach etcd through it", id, p.Name(), st)
		}
		if b := c.Broker(id); b.EtcdClientAddr != "" || b.EtcdPeerAddr != "" {
			t.Fatalf("broker %d has etcd listeners %q, %q with an external etcd", id, b.EtcdClientAddr, b.EtcdPeerAddr)
		}
	}
	if c.EtcdProxy(0) != nil || c.EtcdProxy(cluster.Size+1) != nil {
		t.Fatal("EtcdProxy of an unknown broker is not nil")
	}
	if err := c.FillDisk(1, 0); err == nil {
		t.Fatal("FillDisk without DataDirBytes succeeded")
	}

	adm := kadm.NewClient(newClient(t, c))
	if _, err := adm.CreateTopic(ctx, 3, cluster.Size, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for p := range int32(3) {
		waitLeader(t, c, topic, p, func(leader, _ int32) bool { return leader > 0 })
	}
	prod := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(stepTimeout), kgo.ProduceRequestTimeout(3*time.Second), kgo.RequestTimeoutOverhead(2*time.Second))
	acked := map[string]position{}
	produce(t, prod, topic, "before", []int32{0, 1, 2}, 9, acked)

	// Blackhole the controller's link to etcd, both ways and then only its
	// requests: its registration lease expires and the others stop listing
	// it; another broker becomes controller. Once healed it registers again.
	md := newMetadataAsker(t, c)
	for _, dir := range []netproxy.Direction{netproxy.BothWays, netproxy.ToUpstream} {
		victim, err := c.Controller(ctx)
		if err != nil {
			t.Fatal(err)
		}
		observer := victim%cluster.Size + 1
		cutAt := time.Now()
		c.EtcdProxy(victim).Blackhole(dir)
		waitMetadata(ctx, t, md, observer, fmt.Sprintf("broker %d no longer listed", victim), func(brokers []int32, _ int32) bool {
			return !slices.Contains(brokers, victim)
		})
		left := time.Since(cutAt)
		waitMetadata(ctx, t, md, observer, "another controller", func(_ []int32, ctl int32) bool {
			return ctl > 0 && ctl != victim
		})
		t.Logf("%v: broker %d (controller) blackholed from etcd: broker %d stopped listing it after %v and named another controller after %v",
			dir, victim, observer, left.Round(time.Millisecond), time.Since(cutAt).Round(time.Millisecond))
		// What the cut-off broker says of itself meanwhile, recorded, not
		// asserted: broker/ keeps /readyz at 200 and answers from its last view.
		own, ownCtl, err := md.ask(ctx, victim)
		t.Logf("%v: meanwhile broker %d lists %v with controller %d (%v) and answers /readyz: %s",
			dir, victim, own, ownCtl, err, readyz(ctx, c.Broker(victim)))

		healAt := time.Now()
		c.EtcdProxy(victim).Heal()
		waitMetadata(ctx, t, md, observer, fmt.Sprintf("broker %d listed again", victim), func(brokers []int32, _ int32) bool {
			return slices.Contains(brokers, victim)
		})
		back := time.Since(healAt)
		for id := int32(1); id <= cluster.Size; id++ {
			waitMetadata(ctx, t, md, id, "every broker and a controller", func(brokers []int32, ctl int32) bool {
				return len(brokers) == cluster.Size && ctl > 0
			})
		}
		t.Logf("%v: healed: broker %d listed again after %v, every broker lists all and a controller after %v; proxy %+v",
			dir, victim, back.Round(time.Millisecond), time.Since(healAt).Round(time.Millisecond), c.EtcdProxy(victim).Stats())
	}
	produce(t, prod, topic, "after", []int32{0, 1, 2}, 9, acked)
	readBack(t, c, topic, acked)

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("whole test %v", time.Since(begin).Round(time.Millisecond))
}

// startCluster starts a cluster of cfg (its Dir, binaries and logger
// filled in) and stops it at cleanup, showing the brokers' logs if the
// test failed.
func startCluster(ctx context.Context, t *testing.T, cfg cluster.Config) *cluster.Cluster {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	cfg.Sluiced, cfg.VersityGW = sluicedPath, versitygwPath
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger()
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil && !t.Failed() {
			t.Error(err)
		}
		if t.Failed() {
			for id := int32(1); id <= cluster.Size; id++ {
				logTail(t, c.Broker(id))
			}
		}
	})
	return c
}

// metadataAsker asks one chosen broker for Metadata, through a client
// pinned to each.
type metadataAsker struct{ clients map[int32]*kgo.Client }

func newMetadataAsker(t *testing.T, c *cluster.Cluster) *metadataAsker {
	t.Helper()
	m := &metadataAsker{clients: map[int32]*kgo.Client{}}
	for id := int32(1); id <= cluster.Size; id++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Broker(id).KafkaAddr), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		m.clients[id] = cl
	}
	return m
}

// ask returns the brokers broker id lists, and the controller it names.
func (m *metadataAsker) ask(ctx context.Context, id int32) ([]int32, int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := m.clients[id].SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, -1, err
	}
	md := resp.(*kmsg.MetadataResponse)
	var brokers []int32
	for _, b := range md.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	slices.Sort(brokers)
	return brokers, md.ControllerID, nil
}

// waitMetadata polls broker id's Metadata until ok accepts it.
func waitMetadata(ctx context.Context, t *testing.T, m *metadataAsker, id int32, what string, ok func(brokers []int32, controller int32) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		brokers, ctl, err := m.ask(ctx, id)
		if err == nil && ok(brokers, ctl) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("broker %d's Metadata: not %s within %v: last brokers %v, controller %d, %v", id, what, stepTimeout, brokers, ctl, err)
		case <-tick.C:
		}
	}
}

// readyz is what broker b answers to GET /readyz, for a log line.
func readyz(ctx context.Context, b *cluster.Broker) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.HTTPAddr+"/readyz", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	_ = resp.Body.Close()
	return resp.Status
}
