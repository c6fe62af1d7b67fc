package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/meta"
)

// TestTenantsKafkaNamespaces: two tenants each have a topic "orders" and a
// group "billing" over the Kafka protocol (SCRAM over SASL_PLAINTEXT). Each
// sees and reads only its own: Metadata lists its topics unqualified,
// records never cross, a topic ID of the other tenant's topic answers
// UNKNOWN_TOPIC_ID, its group's offsets are its own. A super user sees
// both, qualified (tenant~name).
func TestTenantsKafkaNamespaces(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.Listeners = "SASL_PLAINTEXT://" + cfg.KafkaListen
	cfg.KafkaListen, cfg.KafkaAdvertise = "", ""
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = true // isolation here is by names, not ACLs
	cfg.SuperUsers = []string{"User:root"}
	b := startBroker(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, tn := range []string{"acme", "globex", meta.SystemTenant} {
		if _, err := b.Store.EnsureTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	addUser := func(name, tenant string) {
		u := meta.User{Name: name, Tenant: tenant, Scram: map[string]meta.ScramKeys{}}
		cred, err := auth.NewScramCredential(auth.MechanismScramSHA512, name+"-pw", auth.DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		u.Scram[auth.MechanismScramSHA512] = meta.ScramKeys{Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations}
		if _, err := b.Store.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	addUser("ann", "acme")
	addUser("gus", "globex")
	addUser("root", meta.SystemTenant)
	for _, u := range []string{"ann", "gus", "root"} {
		awaitScramUser(t, b, scram.Auth{User: u, Pass: u + "-pw"}.AsSha512Mechanism())
	}
	client := func(user string, opts ...kgo.Opt) *kgo.Client {
		mech := scram.Auth{User: user, Pass: user + "-pw"}.AsSha512Mechanism()
		return testClient(t, b, append([]kgo.Opt{kgo.SASL(mech)}, opts...)...)
	}
	ann, gus, root := client("ann"), client("gus"), client("root")

	// Each creates "orders" and writes its own record.
	for who, cl := range map[string]*kgo.Client{"ann": ann, "gus": gus} {
		createTopic(t, cl, "orders", 1, nil)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("from " + who)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", who, err)
		}
	}
	// Metadata: each sees one "orders", unqualified, with its own ID.
	ids := map[string][16]byte{}
	for who, cl := range map[string]*kgo.Client{"ann": ann, "gus": gus} {
		md, err := kadm.NewClient(cl).Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		names := md.Topics.Names()
		if len(names) != 1 || names[0] != "orders" {
			t.Fatalf("%s sees topics %v, want [orders]", who, names)
		}
		ids[who] = md.Topics["orders"].ID
	}
	if ids["ann"] == ids["gus"] {
		t.Fatal("both tenants' orders have one topic ID: they are one topic")
	}
	// Records never cross.
	for _, who := range []string{"ann", "gus"} {
		c := client(who, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		fetches := c.PollRecords(ctx, 10)
		if err := fetches.Err(); err != nil {
			t.Fatalf("%s: poll: %v", who, err)
		}
		recs := fetches.Records()
		if len(recs) != 1 || string(recs[0].Value) != "from "+who || recs[0].Topic != "orders" {
			t.Fatalf("%s read %d records (%v), want only its own", who, len(recs), recs)
		}
	}
	// A topic ID of the other tenant's topic is unknown.
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = ids["gus"]
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, ann)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("ann asked for globex's topic ID: %+v, want UNKNOWN_TOPIC_ID", resp.Topics)
	}
	// One group name, two groups: each tenant's offsets are its own.
	for who, cl := range map[string]*kgo.Client{"ann": ann, "gus": gus} {
		adm := kadm.NewClient(cl)
		off := int64(1)
		if who == "gus" {
			off = 0
		}
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "orders", Partition: 0, At: off, LeaderEpoch: -1})
		if _, err := adm.CommitOffsets(ctx, "billing", os); err != nil {
			t.Fatalf("%s: commit: %v", who, err)
		}
	}
	for who, want := range map[string]int64{"ann": 1, "gus": 0} {
		cl := ann
		if who == "gus" {
			cl = gus
		}
		got, err := kadm.NewClient(cl).FetchOffsets(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := got.Lookup("orders", 0); !ok || o.At != want {
			t.Fatalf("%s's billing offset of orders-0: %+v (found %v), want %d", who, o, ok, want)
		}
		groups, err := kadm.NewClient(cl).ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if names := groups.Groups(); len(names) != 1 || names[0] != "billing" {
			t.Fatalf("%s lists groups %v, want [billing]", who, names)
		}
	}
	// The super user sees both, qualified.
	md, err := kadm.NewClient(root).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"acme~orders", "globex~orders"} {
		if _, ok := md.Topics[want]; !ok {
			t.Fatalf("the super user sees %v, want %s among them", md.Topics.Names(), want)
		}
	}
}

// TestDeletedUserCutOffWithinSessionLifetime: a user deleted while its
// client keeps producing on an open connection stops being served within
// the SASL session lifetime (KIP-368): its re-authentication fails and
// the connection closes; a new login is refused.
func TestDeletedUserCutOffWithinSessionLifetime(t *testing.T) {
	const lifetime = 2 * time.Second
	cfg := testBrokerConfig(t)
	cfg.Listeners = "SASL_PLAINTEXT://" + cfg.KafkaListen
	cfg.KafkaListen, cfg.KafkaAdvertise = "", ""
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = true
	cfg.SASLSessionLifetime = lifetime
	b := startBroker(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.Store.EnsureTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	cred, err := auth.NewScramCredential(auth.MechanismScramSHA512, "dan-pw", auth.DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.CreateUser(ctx, meta.User{Name: "dan", Tenant: "acme", Scram: map[string]meta.ScramKeys{
		auth.MechanismScramSHA512: {Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations},
	}}); err != nil {
		t.Fatal(err)
	}
	awaitScramUser(t, b, scram.Auth{User: "dan", Pass: "dan-pw"}.AsSha512Mechanism())
	cl := testClient(t, b, kgo.SASL(scram.Auth{User: "dan", Pass: "dan-pw"}.AsSha512Mechanism()),
		kgo.DefaultProduceTopic("stream"), kgo.RecordRetries(0), kgo.RequestRetries(0))
	createTopic(t, cl, "stream", 1, nil)
	produce := func() error {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Value: []byte("tick")}).FirstErr()
	}
	if err := produce(); err != nil {
		t.Fatalf("produce before the deletion: %v", err)
	}
	if err := b.Store.DeleteUser(ctx, "dan"); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	lastServed := deleted
	for {
		err := produce()
		if err != nil {
			t.Logf("last served %v after the deletion; then refused: %v", lastServed.Sub(deleted).Round(10*time.Millisecond), err)
			break
		}
		lastServed = time.Now()
		if lastServed.Sub(deleted) > 2*lifetime+5*time.Second {
			t.Fatalf("still served %v after the user was deleted (session lifetime %v)", lastServed.Sub(deleted), lifetime)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Served at most until the session's lifetime ran out (a margin for
	// etcd's watch and the scheduling of this shared machine), never after.
	if served := lastServed.Sub(deleted); served > lifetime+2*time.Second {
		t.Fatalf("served %v after the user was deleted, beyond the session lifetime %v", served, lifetime)
	}
	// A new login fails too.
	fresh := testClient(t, b, kgo.SASL(scram.Auth{User: "dan", Pass: "dan-pw"}.AsSha512Mechanism()), kgo.RequestRetries(0))
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	if err := fresh.Ping(pctx); err == nil {
		t.Fatal("a deleted user logged in")
	}
}
