package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/fair"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/meta"
)

// TestFairLanesCarryTheTenant: a Produce waits for its tenant's turn in the
// handler lane and a consumer Fetch pass in the tail lane, each queued under
// the tenant of its authenticated principal. The lanes have one slot here,
// held by the test, so the queue is observable; released, both complete.
func TestFairLanesCarryTheTenant(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.Listeners = "SASL_PLAINTEXT://" + cfg.KafkaListen
	cfg.KafkaListen, cfg.KafkaAdvertise = "", ""
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = true
	cfg.FairHandlerSlots, cfg.FairTailSlots = 1, 1
	b := startBroker(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.Store.EnsureTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	cred, err := auth.NewScramCredential(auth.MechanismScramSHA512, "ann-pw", auth.DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.CreateUser(ctx, meta.User{Name: "ann", Tenant: "acme", Scram: map[string]meta.ScramKeys{
		auth.MechanismScramSHA512: {Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations},
	}}); err != nil {
		t.Fatal(err)
	}
	mech := scram.Auth{User: "ann", Pass: "ann-pw"}.AsSha512Mechanism()
	awaitScramUser(t, b, mech)
	cl := testClient(t, b, kgo.SASL(mech), kgo.ConsumeTopics("orders"), kgo.FetchMaxWait(100*time.Millisecond))
	createTopic(t, cl, "orders", 1, nil)

	hold := func(l *fair.Lane) fair.Grant {
		t.Helper()
		g, err := l.Acquire(ctx, "holder", 1)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	queued := func(l *fair.Lane, tenant string) {
		t.Helper()
		eventuallyTrue(t, fmt.Sprintf("a request of %s queued in the %s lane", tenant, l.Name()), func() (bool, string) {
			return l.Queued(tenant) == 1, fmt.Sprintf("%+v", l.Stats())
		})
	}

	// Produce: held in the handler lane under tenant acme.
	g := hold(b.Fair.Handler)
	produced := make(chan error, 1)
	cl.Produce(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}, func(_ *kgo.Record, err error) { produced <- err })
	queued(b.Fair.Handler, "acme")
	select {
	case err := <-produced:
		t.Fatalf("the produce was answered (%v) while its lane was held", err)
	case <-time.After(100 * time.Millisecond):
	}
	g.Done(0)
	select {
	case err := <-produced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the produce was not answered once its lane was free")
	}

	// Fetch: each pass takes the tail lane under tenant acme.
	g = hold(b.Fair.Tail)
	fetched := make(chan int, 1)
	go func() {
		fs := cl.PollFetches(ctx)
		fetched <- fs.NumRecords()
	}()
	queued(b.Fair.Tail, "acme")
	g.Done(0)
	select {
	case n := <-fetched:
		if n != 1 {
			t.Fatalf("fetched %d records, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch was not answered once its lane was free")
	}
}

// awaitScramUser waits until the broker's security view has learnt a user
// just written to etcd (it follows etcd by a watch, so a credential takes
// effect a moment after it is stored, as in Kafka): until a client
// authenticating with mech is no longer refused.
func awaitScramUser(t *testing.T, b *Broker, mech sasl.Mechanism) {
	t.Helper()
	brokertest.EventuallyWhy(t, 30*time.Second, "the broker knows the new user", func() (bool, string) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.KafkaAddr()), kgo.SASL(mech), kgo.RequestRetries(0))
		if err != nil {
			return false, err.Error()
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = cl.Ping(ctx)
		return err == nil, fmt.Sprint(err)
	})
}
