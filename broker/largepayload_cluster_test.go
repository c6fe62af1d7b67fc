package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// replicaFetchBytes is sluice_replica_fetch_bytes_total of topic summed
// over the cluster's brokers.
func replicaFetchBytes(t *testing.T, c *testCluster, topic string) float64 {
	t.Helper()
	total := 0.0
	for _, b := range c.brokers {
		mfs, err := b.M.Reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "sluice_replica_fetch_bytes_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "topic" && l.GetValue() == topic {
						total += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return total
}

// awaitReplicated waits until every replica of topic-0 holds hw records.
func awaitReplicated(t *testing.T, c *testCluster, topic string, hw int64) {
	t.Helper()
	for _, b := range c.brokers {
		p, err := b.PartitionOf(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		eventuallyTrue(t, "the replica holds every record", func() (bool, string) {
			end := int64(p.Log().EndOffset())
			return end >= hw, fmt.Sprintf("log end %d of %d", end, hw)
		})
	}
}

// TestClusterReplicatesOnlyTheEnvelope: publishing 100 MB objects by
// reference through a 3-broker cluster (a Kafka produce and an HTTP publish
// on each broker, forwarded to the leader where it does not lead) moves
// less than 4 KiB of replication bytes per publish, where one inline record
// of 200 KiB moves it twice (one copy per follower).
func TestClusterReplicatesOnlyTheEnvelope(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	obj := testRef("big100mb", 100<<20)
	claimer := newTestClaimer(testSession{tenant: "default", r: obj})
	c := startTestClusterWith(t, 3, func(cfg *Config) { cfg.Refs = claimer })
	eventuallyTrue(t, "broker 1 sees three brokers", func() (bool, string) {
		n := len(c.brokers[0].Brokers())
		return n == 3, fmt.Sprintf("%d brokers", n)
	})
	cl := testClient(t, c.brokers[0], kgo.RequiredAcks(kgo.AllISRAcks()))
	createReplicatedTopic(t, cl, "refs", 1, 3)
	createReplicatedTopic(t, cl, "inline", 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "refs", Value: []byte("preview"), Headers: envelopeHeaders(obj)}).FirstErr(); err != nil {
		t.Fatalf("produce the envelope: %v", err)
	}
	objRef := fmt.Sprintf(`{"ref":%q,"size":%d,"sha256":%q,"content_type":%q}`, obj.ID, obj.Size, obj.SHA256, obj.ContentType)
	for i, b := range c.brokers {
		code, body := postJSON(t, httpBase(b)+"/v1/topics/refs/messages:publish",
			`{"messages":[{"object_ref":`+objRef+`,"preview":"preview"}]}`)
		if code != http.StatusOK {
			t.Fatalf("HTTP publish on broker %d: %d %v", i+1, code, body)
		}
	}
	const publishes = 4
	awaitReplicated(t, c, "refs", publishes)
	moved := replicaFetchBytes(t, c, "refs")
	t.Logf("%d publishes of a %d-byte object moved %.0f replication bytes (%.0f per publish)", publishes, obj.Size, moved, moved/publishes)
	if moved == 0 || moved/publishes >= 4096 {
		t.Fatalf("replication moved %.0f bytes for %d envelopes, want between 1 and %d per publish", moved, publishes, 4096)
	}

	// The metric counts what replication carries: an inline record's bytes
	// reach each follower.
	const inline = 200 << 10
	value := make([]byte, inline)
	rand.NewChaCha8([32]byte{3}).Read(value) // incompressible
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "inline", Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	awaitReplicated(t, c, "inline", 1)
	got := replicaFetchBytes(t, c, "inline")
	t.Logf("one inline record of %d bytes moved %.0f replication bytes", inline, got)
	if got < 2*inline {
		t.Fatalf("an inline record of %d bytes moved %.0f replication bytes, want at least %d", inline, got, 2*inline)
	}
}
