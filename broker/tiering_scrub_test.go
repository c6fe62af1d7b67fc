package broker

// The controller's orphan scrub against clocks that disagree: the
// controller's clock (cfg.Now, which --clock-offset-file shifts) ahead of
// the store's never makes a key just PUT look old.

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
)

// listCounter counts finished listings of the bucket: one per scrub pass.
type listCounter struct {
	objstore.Store
	n atomic.Int64
}

func (s *listCounter) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	err := s.Store.List(ctx, prefix, fn)
	s.n.Add(1)
	return err
}

// wellFormedOrphan is a key of the partition of key (an object's) that
// nothing names, as a deposed leader's upload or a manifest whose head
// write is still under way would be.
func wellFormedOrphan(key string) string {
	dir, name := key[:strings.LastIndex(key, "/")+1], key[strings.LastIndex(key, "/")+1:]
	f := strings.SplitN(name, "-", 3) // base, epoch, uuid.obj
	return dir + f[0] + "-" + f[1] + "-00000000-0000-4000-8000-000000000000.obj"
}

// With the controller's clock two hours ahead of the store's and a grace of
// an hour, a key just PUT and named by nothing survives pass after pass:
// the scrub judges how long it has seen the key unnamed on its own clock.
// (Judged as controller time minus the store's LastModified, it was two
// hours old and deleted on the first pass.)
func TestTieringScrubKeepsFreshKeyWhenClockAhead(t *testing.T) {
	store := &listCounter{Store: mem.New()}
	cfg := testBrokerConfig(t)
	cfg.Objects = store
	cfg.ScrubInterval, cfg.TierGrace = 20*time.Millisecond, time.Hour
	cfg.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	b := startBroker(t, cfg)
	cl := testClient(t, b, kgo.ProducerLinger(0))
	const topic = "skewed"
	createTopic(t, cl, topic, 1, tieringConfigs)
	produceValues(t, cl, topic, 100)
	p, _ := b.PartitionOf(topic, 0)
	eventuallyTrue(t, "an upload", func() (bool, string) {
		r := b.RemoteRange(context.Background(), p)
		return r.RemoteEnd > 0, fmt.Sprintf("remote end %d", r.RemoteEnd)
	})
	objs, _, err := b.Tiers.Objects(context.Background(), p.TopicID(), 0)
	if err != nil || len(objs) == 0 {
		t.Fatalf("objects %v, %v", objs, err)
	}
	fresh := wellFormedOrphan(objs[0].Key)
	if err := b.Objects.Put(context.Background(), fresh, []byte("head write under way")); err != nil {
		t.Fatal(err)
	}
	from := store.n.Load()
	eventuallyTrue(t, "three scrub passes over the fresh key", func() (bool, string) {
		if _, err := b.Objects.Head(context.Background(), fresh); err != nil {
			t.Fatalf("a key PUT moments ago was scrubbed after %d passes: %v", store.n.Load()-from, err)
		}
		n := store.n.Load() - from
		return n >= 4, fmt.Sprintf("%d passes", n)
	})
	if _, err := b.Objects.Head(context.Background(), fresh); err != nil {
		t.Fatalf("a key PUT moments ago was scrubbed: %v", err)
	}
	if _, ok := tier.ParseKey(fresh); !ok {
		t.Fatalf("%s is not a key of ours: the scrub would never touch it", fresh)
	}
}
