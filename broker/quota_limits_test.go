package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// testQuotas is a quota.Source a test may change while the broker runs
// (as the etcd-fed one changes on a watch).
type testQuotas struct {
	mu sync.Mutex
	by map[string]quota.Limits
}

func (q *testQuotas) Limits(tenant string) quota.Limits {
	q.mu.Lock()
	defer q.mu.Unlock()
	return maps.Clone(q.by[tenant])
}

func (q *testQuotas) set(tenant string, l quota.Limits) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.by[tenant] = l
}

// startTenantBroker runs a broker with security on (SCRAM over
// SASL_PLAINTEXT) whose limits come from q, with one user per tenant named
// in users (user → tenant); client returns a franz-go client of a user.
func startTenantBroker(t *testing.T, q quota.Source, users map[string]string) (*Broker, func(user string, opts ...kgo.Opt) *kgo.Client) {
	t.Helper()
	cfg := testBrokerConfig(t)
	cfg.Listeners = "SASL_PLAINTEXT://" + cfg.KafkaListen
	cfg.KafkaListen, cfg.KafkaAdvertise = "", ""
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = true
	cfg.Quotas = q
	b := startBroker(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, tenant := range users {
		if _, err := b.Store.EnsureTenant(ctx, tenant); err != nil {
			t.Fatal(err)
		}
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
	client := func(user string, opts ...kgo.Opt) *kgo.Client {
		mech := scram.Auth{User: user, Pass: user + "-pw"}.AsSha512Mechanism()
		return testClient(t, b, append([]kgo.Opt{kgo.SASL(mech)}, opts...)...)
	}
	// The broker learns users through a watch: wait until each signs in.
	for name := range users {
		deadline := time.Now().Add(10 * time.Second)
		for {
			cl := client(name)
			_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			cl.Close()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("user %s cannot sign in: %v", name, err)
			}
		}
	}
	return b, client
}

// createTopicsResp creates one topic and returns its result.
func createTopicsResp(t *testing.T, cl *kgo.Client, name string, partitions int32) (*kmsg.CreateTopicsResponse, kmsg.CreateTopicsResponseTopic) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp, resp.Topics[0]
}

// wantRefused fails the test unless code is want and the message holds
// every one of parts.
func wantRefused(t *testing.T, what string, code int16, msg *string, want *kerr.Error, parts ...string) {
	t.Helper()
	m := ""
	if msg != nil {
		m = *msg
	}
	if code != want.Code {
		t.Fatalf("%s: code %d (%s), want %s", what, code, m, want.Message)
	}
	for _, p := range parts {
		if !strings.Contains(m, p) {
			t.Fatalf("%s: message %q does not name %q", what, m, p)
		}
	}
}

// TestTenantCountQuotas: over the wire (SCRAM, franz-go), a tenant with
// topics=2, partitions=3, groups=1 gets POLICY_VIOLATION with a message
// naming the quota and the counts from CreateTopics, CreatePartitions,
// auto-creation on metadata and a new group (commit and join), while a
// tenant without limits is not touched; raising the quota lets it create.
func TestTenantCountQuotas(t *testing.T) {
	q := &testQuotas{by: map[string]quota.Limits{
		"acme": {quota.Topics: 2, quota.Partitions: 3, quota.Groups: 1},
	}}
	_, client := startTenantBroker(t, q, map[string]string{"ann": "acme", "gus": "globex"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ann, gus := client("ann"), client("gus")

	createTopic(t, ann, "a", 2, nil)
	_, st := createTopicsResp(t, ann, "b", 2)
	wantRefused(t, "3rd and 4th partitions", st.ErrorCode, st.ErrorMessage, kerr.PolicyViolation, "partitions", "is 3", "has 2 partitions")
	createTopic(t, ann, "b", 1, nil)
	_, st = createTopicsResp(t, ann, "c", 1)
	wantRefused(t, "3rd topic", st.ErrorCode, st.ErrorMessage, kerr.PolicyViolation, "topics", "is 2", "has 2 topics")

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "a", 3
	cp.Topics = append(cp.Topics, cpt)
	cpr, err := cp.RequestWith(ctx, ann)
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "CreatePartitions", cpr.Topics[0].ErrorCode, cpr.Topics[0].ErrorMessage, kerr.PolicyViolation, "partitions", "has 3 partitions")

	md := kmsg.NewPtrMetadataRequest()
	mdt := kmsg.NewMetadataRequestTopic()
	mdt.Topic = kmsg.StringPtr("auto")
	md.Topics, md.AllowAutoTopicCreation = append(md.Topics, mdt), true
	mdr, err := md.RequestWith(ctx, ann)
	if err != nil {
		t.Fatal(err)
	}
	if len(mdr.Topics) != 1 || mdr.Topics[0].ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("auto-creation over the topics quota: %+v, want POLICY_VIOLATION", mdr.Topics)
	}

	// Another tenant is not limited.
	for _, n := range []string{"a", "b", "c", "d"} {
		createTopic(t, gus, n, 2, nil)
	}

	// Groups: the first is made, the second is refused, by commit and by join.
	adm := kadm.NewClient(ann)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "a", Partition: 0, At: 0, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "g1", os); err != nil {
		t.Fatalf("first group: %v", err)
	}
	if _, err := adm.CommitOffsets(ctx, "g1", os); err != nil {
		t.Fatalf("first group again: %v", err)
	}
	resp, err := adm.CommitOffsets(ctx, "g2", os)
	if err == nil {
		err = resp.Error()
	}
	if !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("second group by commit: %v, want POLICY_VIOLATION", err)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g3", "consumer", 10000, 10000
	join.MemberID = ""
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name = "range"
	join.Protocols = append(join.Protocols, proto)
	jr, err := join.RequestWith(ctx, ann)
	if err != nil {
		t.Fatal(err)
	}
	if jr.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("second group by join: code %d, want POLICY_VIOLATION", jr.ErrorCode)
	}

	// Raised: creation resumes.
	q.set("acme", quota.Limits{quota.Topics: 3, quota.Partitions: 10, quota.Groups: 2})
	createTopic(t, ann, "c", 1, nil)
	if resp, err := adm.CommitOffsets(ctx, "g2", os); err != nil || resp.Error() != nil {
		t.Fatalf("second group after the raise: %v %v", err, resp.Error())
	}
}

// TestTenantMutationRate: controller_mutation_rate (KIP-599) over the
// wire: a full bucket admits one topic of 20 partitions at 1/s; the next
// CreateTopics, CreatePartitions and DeleteTopics answer
// THROTTLING_QUOTA_EXCEEDED with throttle_time_ms and nothing changes.
// Each request goes on a client of its own: franz-go honours
// throttle_time_ms (KIP-219) and would otherwise wait out the debt first.
func TestTenantMutationRate(t *testing.T) {
	q := &testQuotas{by: map[string]quota.Limits{"acme": {quota.ControllerMutationRate: 1}}}
	b, client := startTenantBroker(t, q, map[string]string{"ann": "acme"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ann := client("ann")

	createTopic(t, ann, "a", 20, nil)
	resp, st := createTopicsResp(t, client("ann"), "b", 1)
	wantRefused(t, "CreateTopics in debt", st.ErrorCode, st.ErrorMessage, kerr.ThrottlingQuotaExceeded, "controller_mutation_rate")
	if resp.ThrottleMillis <= 0 || resp.ThrottleMillis > 19000 {
		t.Fatalf("throttle_time_ms %d, want (0, 19000]", resp.ThrottleMillis)
	}
	if b.LookupTopic("acme~b") != nil {
		t.Fatal("a throttled topic was created")
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "a", 21
	cp.Topics = append(cp.Topics, cpt)
	cpr, err := cp.RequestWith(ctx, client("ann"))
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "CreatePartitions in debt", cpr.Topics[0].ErrorCode, cpr.Topics[0].ErrorMessage, kerr.ThrottlingQuotaExceeded)
	if cpr.ThrottleMillis <= 0 {
		t.Fatalf("CreatePartitions throttle_time_ms %d", cpr.ThrottleMillis)
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("a")
	dt.Topics, dt.TopicNames = append(dt.Topics, dtt), []string{"a"}
	dtr, err := dt.RequestWith(ctx, client("ann"))
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "DeleteTopics in debt", dtr.Topics[0].ErrorCode, dtr.Topics[0].ErrorMessage, kerr.ThrottlingQuotaExceeded)
	if dtr.ThrottleMillis <= 0 || b.LookupTopic("acme~a") == nil {
		t.Fatalf("DeleteTopics throttle_time_ms %d; topic still there: %v", dtr.ThrottleMillis, b.LookupTopic("acme~a") != nil)
	}
}

// TestTenantStorageQuota: a tenant at storage_bytes is refused produce
// with the retriable KAFKA_STORAGE_ERROR once the broker's figure catches
// up; raising the quota lets writes resume; every acknowledged record is
// read back. Another tenant keeps producing throughout. Then, at the
// quota again, retention freeing room (retention.bytes=0) lets writes
// resume without a raise.
func TestTenantStorageQuota(t *testing.T) {
	q := &testQuotas{by: map[string]quota.Limits{"acme": {quota.StorageBytes: 4096}}}
	_, client := startTenantBroker(t, q, map[string]string{"ann": "acme", "gus": "globex"})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := []kgo.Opt{kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(30 * time.Second), kgo.ProducerBatchCompression(kgo.NoCompression())}
	ann, gus := client("ann", opts...), client("gus", opts...)
	createTopic(t, ann, "s", 1, map[string]string{"segment.bytes": "1024"})
	createTopic(t, gus, "s", 1, nil)

	value := make([]byte, 1024)
	acked := 0
	var refused error
	deadline := time.Now().Add(30 * time.Second)
	for refused == nil && time.Now().Before(deadline) {
		err := ann.ProduceSync(ctx, &kgo.Record{Topic: "s", Value: value}).FirstErr()
		switch {
		case err == nil:
			acked++
		case errors.Is(err, kerr.KafkaStorageError):
			refused = err
		default:
			t.Fatalf("produce: %v", err)
		}
		if err := gus.ProduceSync(ctx, &kgo.Record{Topic: "s", Value: value}).FirstErr(); err != nil {
			t.Fatalf("a tenant without the quota was refused: %v", err)
		}
	}
	if refused == nil {
		t.Fatalf("%d records of 1 KiB acknowledged under a 4 KiB quota and none refused", acked)
	}
	if acked < 4 {
		t.Fatalf("refused after %d records, before the quota was reached", acked)
	}
	q.set("acme", quota.Limits{quota.StorageBytes: 1 << 30})
	deadline = time.Now().Add(30 * time.Second)
	for {
		err := ann.ProduceSync(ctx, &kgo.Record{Topic: "s", Value: value}).FirstErr()
		if err == nil {
			acked++
			break
		}
		if !errors.Is(err, kerr.KafkaStorageError) || time.Now().After(deadline) {
			t.Fatalf("after the raise: %v", err)
		}
	}
	c := client("ann", kgo.ConsumeTopics("s"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < acked {
		fs := c.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("read back after %d of %d: %v", got, acked, err)
		}
		got += fs.NumRecords()
	}
	if got != acked {
		t.Fatalf("read %d records, %d were acknowledged", got, acked)
	}

	// At the quota again; retention frees room and writes resume.
	q.set("acme", quota.Limits{quota.StorageBytes: 4096})
	deadline = time.Now().Add(30 * time.Second)
	for {
		err := ann.ProduceSync(ctx, &kgo.Record{Topic: "s", Value: value}).FirstErr()
		if errors.Is(err, kerr.KafkaStorageError) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("at the quota again: %v", err)
		}
	}
	alt, err := kadm.NewClient(ann).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.bytes", Value: kadm.StringPtr("0")}}, "s")
	if err != nil || alt[0].Err != nil {
		t.Fatalf("retention.bytes=0: %v %v", err, alt)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		err := ann.ProduceSync(ctx, &kgo.Record{Topic: "s", Value: value}).FirstErr()
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.KafkaStorageError) || time.Now().After(deadline) {
			t.Fatalf("after retention freed room: %v", err)
		}
	}
}

// TestHTTPQuotaStatuses: over the HTTP API a count quota answers 403, the
// mutation rate 429 with Retry-After and the storage quota 507, each with
// its code and a message naming the quota.
func TestHTTPQuotaStatuses(t *testing.T) {
	q := &testQuotas{by: map[string]quota.Limits{meta.DefaultTenant: {
		quota.Partitions: 4, quota.ControllerMutationRate: 1, quota.StorageBytes: 1}}}
	cfg := testBrokerConfig(t)
	cfg.Quotas = q
	b := startBroker(t, cfg)
	c := httpCaller{t: t, client: http.DefaultClient, base: httpBase(b)}
	c.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"one","partitions":3,"replication_factor":1}`)
	code, out, _ := c.call("POST", "/v1/topics", `{"name":"big","partitions":2,"replication_factor":1}`)
	if ec, msg := errorCode(out); code != http.StatusForbidden || ec != "quota_exceeded" || !strings.Contains(msg, "partitions") {
		t.Fatalf("5th partition: %d %v, want 403 quota_exceeded naming partitions", code, out)
	}
	code, out, hdr := c.call("POST", "/v1/topics", `{"name":"two","partitions":1,"replication_factor":1}`)
	if ec, msg := errorCode(out); code != http.StatusTooManyRequests || ec != "throttling_quota_exceeded" ||
		!strings.Contains(msg, "controller_mutation_rate") || hdr.Get("Retry-After") == "" {
		t.Fatalf("topic in mutation debt: %d %v (Retry-After %q), want 429 with Retry-After", code, out, hdr.Get("Retry-After"))
	}
	// The first record goes in (nothing retained yet), then the figure
	// catches up and publishes answer 507. At the moment the figure
	// changes (every 2 s) a publish may pass the whole request's check and
	// be refused by its partition's (207, its one result quota_exceeded):
	// also a refusal, but not the whole-request answer this test is for.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, _ = c.call("POST", "/v1/topics/one/messages:publish", `{"messages":[{"payload":"hello"}]}`)
		if code == http.StatusMultiStatus {
			rs, _ := out["results"].([]any)
			var r map[string]any
			if len(rs) == 1 {
				r, _ = rs[0].(map[string]any)
			}
			if r == nil || r["status"] != "quota_exceeded" || !strings.Contains(fmt.Sprint(r["error"]), "storage_bytes") {
				t.Fatalf("publish over the storage quota: 207 %v, want its one result quota_exceeded naming storage_bytes", out)
			}
		} else if code != http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publishes not refused as a whole over a 1-byte storage quota after 30 s (last: %d %v)", code, out)
		}
	}
	if ec, msg := errorCode(out); code != http.StatusInsufficientStorage || ec != "quota_exceeded" || !strings.Contains(msg, "storage_bytes") {
		t.Fatalf("publish over the storage quota: %d %v, want 507 quota_exceeded naming storage_bytes", code, out)
	}
}

// TestStorageFigureIsClusterWide: a tenant's partitions led by two brokers
// retain bytes on each; every broker's figure is the sum over both
// (exchanged through etcd), so a quota above each broker's share but below
// the sum refuses produce on either leader.
func TestStorageFigureIsClusterWide(t *testing.T) {
	q := &testQuotas{by: map[string]quota.Limits{}}
	c := startTestClusterWith(t, 2, func(cfg *Config) { cfg.Quotas = q })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	createReplicatedTopic(t, cl, "s", 2, 1)
	var leaders [2]int32
	eventuallyTrue(t, "both partitions led", func() (bool, string) {
		tp := c.brokers[0].LookupTopic("s")
		if tp == nil || len(tp.States) != 2 {
			return false, "topic not known yet"
		}
		leaders = [2]int32{tp.States[0].Leader, tp.States[1].Leader}
		return leaders[0] >= 0 && leaders[1] >= 0, fmt.Sprint(leaders)
	})
	if leaders[0] == leaders[1] {
		t.Skipf("both partitions placed on node %d; the test needs one on each", leaders[0])
	}
	value := make([]byte, 1000)
	for i := range 10 {
		r := &kgo.Record{Topic: "s", Partition: int32(i % 2), Value: value}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var sum int64
	for _, b := range c.brokers {
		for _, p := range b.AllPartitions() {
			sum += p.Log().Size()
		}
	}
	for _, b := range c.brokers {
		eventuallyTrue(t, fmt.Sprintf("node %d sees the tenant's cluster-wide bytes", b.Cfg.NodeID), func() (bool, string) {
			got := b.StorageBytes(meta.DefaultTenant)
			return got >= sum, fmt.Sprintf("%d of %d", got, sum)
		})
	}
	q.set(meta.DefaultTenant, quota.Limits{quota.StorageBytes: float64(sum - 1)})
	for part := range int32(2) {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "s", Partition: part, Value: value}).FirstErr()
		if !errors.Is(err, kerr.KafkaStorageError) {
			t.Fatalf("produce to partition %d over the cluster-wide quota: %v, want KAFKA_STORAGE_ERROR", part, err)
		}
	}
}
