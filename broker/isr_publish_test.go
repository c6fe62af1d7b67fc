package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestClusterDeadFollowerLeavesEveryISRBeforeItsLease: a follower whose
// process died while its registration lives on (kill -9: the lease lasts
// its TTL) leaves the in-sync set on every surviving broker's Metadata
// once the leader drops it, not when the registration finally goes. On
// the old code the brokers that did not lead the partition reported every
// registered replica in sync.
func TestClusterDeadFollowerLeavesEveryISRBeforeItsLease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestClusterWith(t, 3, func(cfg *Config) { cfg.RegistrationTTL = 20 * time.Second })
	cl := testClient(t, c.brokers[0])
	createReplicatedTopic(t, cl, "isr-dead", 1, 3)
	produceAll(t, c, "isr-dead", 20)
	st := c.brokers[0].LookupTopic("isr-dead").States[0]
	dead := st.Replicas[0]
	if dead == st.Leader {
		dead = st.Replicas[1]
	}
	var survivors []int32
	asks := map[int32]*kgo.Broker{}
	for i, b := range c.brokers {
		if id := int32(i + 1); id != dead {
			survivors = append(survivors, id)
			asks[id] = testClient(t, b).SeedBrokers()[0] // this broker, never another
		}
	}
	// isrOn is partition 0's ISR and whether dead is listed as a live
	// broker, as broker id's Metadata reports them.
	isrOn := func(id int32) ([]int32, bool, error) {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), asks[id])
		if err != nil {
			return nil, false, err
		}
		listed := slices.ContainsFunc(resp.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == dead })
		for _, mt := range resp.Topics {
			if mt.Topic != nil && *mt.Topic == "isr-dead" && len(mt.Partitions) == 1 {
				return mt.Partitions[0].ISR, listed, nil
			}
		}
		return nil, listed, fmt.Errorf("no isr-dead in %+v", resp.Topics)
	}
	eventuallyTrue(t, "every survivor reports three replicas in sync", func() (bool, string) {
		for _, id := range survivors {
			if isr, _, err := isrOn(id); err != nil || len(isr) != 3 {
				return false, fmt.Sprintf("broker %d: ISR %v, %v", id, isr, err)
			}
		}
		return true, ""
	})

	// A clean stop revokes the registration lease at once; to look like
	// kill -9, the dead broker's key is first moved to a lease of the
	// test's that outlives the test's deadline, so it stays registered.
	etcd := c.brokers[survivors[0]-1].Store.Client()
	key := c.brokers[0].Store.Prefix() + "brokers/" + strconv.Itoa(int(dead))
	ctx := t.Context()
	got, err := etcd.Get(ctx, key)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("get %s: %v %v", key, got, err)
	}
	lease, err := etcd.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = etcd.Revoke(context.Background(), lease.ID) })
	if _, err := etcd.Put(ctx, key, string(got.Kvs[0].Value), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	c.stops[dead-1]()
	stopped := time.Now()

	// The leader drops it after its 3 s lag window; 10 s is far below
	// the registration's remaining life.
	brokertest.EventuallyWhy(t, 10*time.Second, fmt.Sprintf("every survivor drops broker %d from the ISR", dead), func() (bool, string) {
		for _, id := range survivors {
			isr, listed, err := isrOn(id)
			if err != nil || !listed || slices.Contains(isr, dead) || len(isr) != 2 {
				return false, fmt.Sprintf("broker %d (leader %d): ISR %v, dead broker listed %v, %v", id, st.Leader, isr, listed, err)
			}
		}
		return true, ""
	})
	t.Logf("broker %d out of every ISR %v after the stop", dead, time.Since(stopped).Round(10*time.Millisecond))
}
