package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/broker/controller"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// TestDefaultPoolsAgree: the pure placement core cannot import meta, so it
// names the default pool itself; the two must be the same string, or a
// broker registered without a pool would be in no tenant's pool.
func TestDefaultPoolsAgree(t *testing.T) {
	if controller.DefaultPool != meta.DefaultPool {
		t.Fatalf("controller.DefaultPool %q, meta.DefaultPool %q", controller.DefaultPool, meta.DefaultPool)
	}
}

// TestClusterTenantPools runs three brokers: 1 in the shared pool (AZ a),
// 2 and 3 in pool gold (AZs a and b). Three, not more, so that stopping
// the cluster keeps its etcd quorum until the last broker.
//
// The default tenant (a client without credentials) is bound to gold: its
// topics, created over Kafka, get every replica on the gold brokers and
// their preferred leaders spread over them; gold's two AZs cannot hold
// three replicas, which kadm and the HTTP API hear as
// INVALID_REPLICATION_FACTOR naming the pool and its AZs. Tenant acme,
// bound to none, is placed in the shared pool; rebinding a tenant applies
// to its next partitions and moves none.
func TestClusterTenantPools(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestClusterWith(t, 3, func(cfg *Config) {
		if cfg.NodeID >= 2 {
			cfg.Pool = "gold"
			cfg.AZ = string(rune('a' + cfg.NodeID - 2))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := c.brokers[0] // a shared broker places gold's partitions
	gold := []int32{2, 3}

	// GET /v1/brokers shows each broker's pool.
	var bs brokersAnswer
	if code := getJSON(t, httpBase(b)+"/v1/brokers", &bs); code != http.StatusOK || len(bs.Brokers) != 3 {
		t.Fatalf("GET /v1/brokers: %d %+v", code, bs)
	}
	for _, bl := range bs.Brokers {
		want := meta.DefaultPool
		if slices.Contains(gold, bl.ID) {
			want = "gold"
		}
		if bl.Pool != want {
			t.Fatalf("GET /v1/brokers: broker %d in pool %q, want %q", bl.ID, bl.Pool, want)
		}
	}

	if _, err := b.Store.EnsureTenant(ctx, meta.DefaultTenant); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.SetTenantPool(ctx, meta.DefaultTenant, "gold"); err != nil {
		t.Fatal(err)
	}
	// Placement follows b's view of the live brokers; on a loaded machine
	// a registration lease (2 s here) can lapse and come back, so each
	// placement waits until b sees all three.
	allLive := func() {
		t.Helper()
		eventuallyTrue(t, "broker 1 sees three brokers", func() (bool, string) {
			n := len(b.Brokers())
			return n == 3, fmt.Sprintf("%d brokers", n)
		})
	}
	// onlyOn checks where topic's n partitions are placed. An admin request
	// kadm sends goes to the controller, which may not be b: b learns the
	// topic (or its new partitions) through its etcd watch, so it is
	// waited for.
	onlyOn := func(topic string, n int, allowed []int32) map[int32]int {
		t.Helper()
		var tp *node.Topic
		eventuallyTrue(t, "broker 1 sees "+topic, func() (bool, string) {
			tp = b.LookupTopic(topic)
			if tp == nil {
				return false, "no topic"
			}
			return len(tp.States) == n, fmt.Sprintf("%d partitions, want %d", len(tp.States), n)
		})
		leaders := map[int32]int{}
		for p, st := range tp.States {
			for _, id := range st.Replicas {
				if !slices.Contains(allowed, id) {
					t.Fatalf("%s partition %d: replicas %v, broker %d outside %v", topic, p, st.Replicas, id, allowed)
				}
			}
			leaders[st.Replicas[0]]++
		}
		return leaders
	}

	adm := kadm.NewClient(testClient(t, b))
	allLive()
	if resp, err := adm.CreateTopic(ctx, 4, 2, nil, "orders"); err != nil || resp.Err != nil {
		t.Fatalf("create orders in gold: %v %+v", err, resp)
	}
	if leaders := onlyOn("orders", 4, gold); leaders[2] != 2 || leaders[3] != 2 {
		t.Fatalf("orders leaders %v, want 2 on each gold broker", leaders)
	}
	// Partitions added later follow the pool too, and the tenant's
	// leaders stay even over it.
	allLive()
	if rs, err := adm.CreatePartitions(ctx, 2, "orders"); err != nil || rs["orders"].Err != nil {
		t.Fatalf("add partitions to orders: %v %+v", err, rs)
	}
	if leaders := onlyOn("orders", 6, gold); leaders[2] != 3 || leaders[3] != 3 {
		t.Fatalf("orders leaders after growing to 6 %v, want 3 on each gold broker", leaders)
	}

	// Three replicas do not fit gold's two AZs, whatever the rest of the
	// cluster has; the default (-1) counts the cluster's AZs, so it is 2
	// here and fits.
	allLive()
	resp, err := adm.CreateTopic(ctx, 1, 3, nil, "wide")
	if err != nil && resp.Err == nil {
		t.Fatal(err)
	}
	if !errors.Is(resp.Err, kerr.InvalidReplicationFactor) || !strings.Contains(resp.ErrMessage, `pool "gold" has 2 AZs ("a", "b")`) {
		t.Fatalf("rf 3 in gold: %v %q, want INVALID_REPLICATION_FACTOR naming the pool and its AZs", resp.Err, resp.ErrMessage)
	}
	t.Logf("refused: %s", resp.ErrMessage)
	allLive()
	code, body := postJSON(t, httpBase(b)+"/v1/topics", `{"name":"wide-http","partitions":1,"replication_factor":3}`)
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body), `pool "gold" has 2 AZs ("a", "b")`) {
		t.Fatalf("POST /v1/topics rf 3 in gold: %d %v", code, body)
	}
	allLive()
	if resp, err := adm.CreateTopic(ctx, 2, -1, nil, "defaulted"); err != nil || resp.Err != nil {
		t.Fatalf("default rf in gold: %v %+v", err, resp)
	}
	onlyOn("defaulted", 2, gold)

	// acme is bound to none: the shared pool, one broker in one AZ.
	allLive()
	if _, err := b.CreateTopic(ctx, "acme~events", 2, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	onlyOn("acme~events", 2, []int32{1})
	allLive()
	if _, err := b.CreateTopic(ctx, "acme~wide", 1, 2, nil, false); err == nil || !strings.Contains(err.Error(), `pool "shared" has 1 AZs ("a")`) {
		t.Fatalf("acme rf 2 in the shared pool: %v", err)
	}

	// Rebound to the shared pool, the default tenant's next topic goes
	// there; its existing partitions stay on gold.
	if _, err := b.Store.SetTenantPool(ctx, meta.DefaultTenant, ""); err != nil {
		t.Fatal(err)
	}
	allLive()
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "later"); err != nil || resp.Err != nil {
		t.Fatalf("create later: %v %+v", err, resp)
	}
	onlyOn("later", 1, []int32{1})
	onlyOn("orders", 6, gold)
}
