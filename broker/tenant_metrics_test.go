package broker

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/quota"
)

// TestTenantMetrics: on a real broker, every refusal by a hard limit or
// quota is counted once in sluice_tenant_rejections_total{tenant,reason}
// (topics and storage over HTTP, partitions and connections over raw Kafka
// connections, groups and controller_mutation_rate with franz-go, a 429
// of the HTTP rate quota); sluice_tenant_connections follows the
// connections the connections quota counts (a refused one is not counted,
// a closed one is uncounted); sluice_tenant_storage_bytes is the figure the
// storage quota checks.
func TestTenantMetrics(t *testing.T) {
	const tenant = auth.DefaultTenant
	src := &testQuotas{by: map[string]quota.Limits{tenant: {quota.Topics: 1, quota.Partitions: 2, quota.Connections: 2}}}
	b := startQuotaBroker(t, src)
	base := httpBase(b)
	rejected := func(reason string) float64 {
		return metricValue(t, b, "sluice_tenant_rejections_total", "tenant", tenant, "reason", reason)
	}
	want := func(reason string, n float64) {
		t.Helper()
		if got := rejected(reason); got != n {
			t.Fatalf("sluice_tenant_rejections_total{reason=%q} = %v, want %v", reason, got, n)
		}
	}
	conns := func() float64 { return metricValue(t, b, "sluice_tenant_connections", "tenant", tenant) }

	// topics: the second topic is refused, once.
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"a","partitions":1}`); code != http.StatusCreated {
		t.Fatalf("create a: %d %v", code, body)
	}
	want(quota.Topics, 0)
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"b","partitions":1}`); code != http.StatusForbidden {
		t.Fatalf("create b over topics=1: %d %v, want 403", code, body)
	}
	want(quota.Topics, 1)

	// connections: two are counted, the third is refused and not counted.
	metadata := func(c *rawConn) error {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(1)
		resp := req.ResponseKind()
		resp.SetVersion(1)
		return c.tryRoundTrip(req, resp, 30*time.Second)
	}
	c1, c2, c3 := dialRaw(t, b, ""), dialRaw(t, b, ""), dialRaw(t, b, "")
	for i, c := range []*rawConn{c1, c2} {
		if err := metadata(c); err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		if n := conns(); n != float64(i+1) {
			t.Fatalf("sluice_tenant_connections = %v after %d connections, want %d", n, i+1, i+1)
		}
	}
	want(quota.Connections, 0)
	_ = metadata(c3) // answered or not, the broker closes it
	c3.waitClosed(10 * time.Second)
	want(quota.Connections, 1)
	if n := conns(); n != 2 {
		t.Fatalf("sluice_tenant_connections = %v after a refused third, want 2", n)
	}

	// partitions: CreatePartitions over partitions=2 on a counted connection.
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(1)
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "a", 3
	cp.Topics = append(cp.Topics, cpt)
	cpr := cp.ResponseKind().(*kmsg.CreatePartitionsResponse)
	cpr.SetVersion(1)
	c1.roundTrip(cp, cpr)
	if len(cpr.Topics) != 1 || cpr.Topics[0].ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("CreatePartitions over partitions=2: %+v, want POLICY_VIOLATION", cpr.Topics)
	}
	want(quota.Partitions, 1)

	_ = c1.nc.Close()
	_ = c2.nc.Close()
	brokertest.Eventually(t, 10*time.Second, "closed connections uncounted", func() bool { return conns() == 0 })

	// storage: the gauge is the figure the quota checks; over it, one
	// publish is refused once (507).
	src.set(tenant, quota.Limits{quota.Topics: 10, quota.Partitions: 100})
	if code, body := postJSON(t, base+"/v1/topics/a/messages:publish", `{"messages":[{"payload":"`+strings.Repeat("s", 500)+`"}]}`); code != http.StatusOK {
		t.Fatalf("publish: %d %v", code, body)
	}
	brokertest.Eventually(t, 10*time.Second, "the storage gauge at the quota's figure", func() bool {
		g := metricValue(t, b, "sluice_tenant_storage_bytes", "tenant", tenant)
		return g >= 500 && g == float64(b.StorageBytes(tenant))
	})
	src.set(tenant, quota.Limits{quota.Topics: 10, quota.Partitions: 100, quota.StorageBytes: 100})
	if code, body := postJSON(t, base+"/v1/topics/a/messages:publish", `{"messages":[{"payload":"x"},{"payload":"y"}]}`); code != http.StatusInsufficientStorage {
		t.Fatalf("publish over storage_bytes: %d %v, want 507", code, body)
	}
	want(quota.StorageBytes, 1)

	// groups and controller_mutation_rate, with franz-go.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src.set(tenant, quota.Limits{quota.Groups: 1, quota.ControllerMutationRate: 1})
	adm := kadm.NewClient(testClient(t, b))
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "a", Partition: 0, At: 0, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "g1", os); err != nil || resp.Error() != nil {
		t.Fatalf("first group: %v %v", err, resp.Error())
	}
	want(quota.Groups, 0)
	if resp, err := adm.CommitOffsets(ctx, "g2", os); err == nil && resp.Error() == nil {
		t.Fatal("a second group over groups=1 was made")
	}
	want(quota.Groups, 1)
	createTopic(t, testClient(t, b), "m1", 5, nil) // a full bucket of 1 admits 5, into debt
	want(quota.ControllerMutationRate, 0)
	_, st := createTopicsResp(t, testClient(t, b), "m2", 1)
	wantRefused(t, "CreateTopics in debt", st.ErrorCode, st.ErrorMessage, kerr.ThrottlingQuotaExceeded)
	want(quota.ControllerMutationRate, 1)

	// The HTTP rate quota: a publish into debt is served, the next is 429.
	src.set(tenant, quota.Limits{quota.ProducerByteRate: 100})
	if code, body := postJSON(t, base+"/v1/topics/a/messages:publish", `{"messages":[{"payload":"`+strings.Repeat("r", 1000)+`"}]}`); code != http.StatusOK {
		t.Fatalf("publish into debt: %d %v", code, body)
	}
	want(quota.RejectHTTPThrottled, 0)
	if code, body := postJSON(t, base+"/v1/topics/a/messages:publish", `{"messages":[{"payload":"r"}]}`); code != http.StatusTooManyRequests {
		t.Fatalf("publish in debt: %d %v, want 429", code, body)
	}
	want(quota.RejectHTTPThrottled, 1)
	// Nothing else refused on the way: each reason counted what it refused.
	want(quota.Topics, 1)
	want(quota.Partitions, 1)
	want(quota.Connections, 1)
	want(quota.StorageBytes, 1)
}
