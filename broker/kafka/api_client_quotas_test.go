package kafka_test

// DescribeClientQuotas and AlterClientQuotas over real sockets: kadm as a
// super user, a tenant admin and an ordinary user against a broker with
// security on whose tenants and quotas live in its own metadata store.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/kafka"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

func entity(typ, name string) kadm.ClientQuotaEntity {
	return kadm.ClientQuotaEntity{{Type: typ, Name: &name}}
}

func set(key string, v float64) kadm.AlterClientQuotaOp {
	return kadm.AlterClientQuotaOp{Key: key, Value: v}
}

// altered runs one alteration of entity as cl and returns its result.
func altered(t *testing.T, cl *kadm.Client, validate bool, e kadm.ClientQuotaEntity, ops ...kadm.AlterClientQuotaOp) kadm.AlteredClientQuota {
	t.Helper()
	alter := cl.AlterClientQuotas
	if validate {
		alter = cl.ValidateAlterClientQuotas
	}
	rs, err := alter(testCtx(t), []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
	if err != nil || len(rs) != 1 {
		t.Fatalf("AlterClientQuotas(%s) = %v, %v", e, rs, err)
	}
	return rs[0]
}

// quotasOf describes as cl and flattens the answer to entity → key → value.
func quotasOf(t *testing.T, cl *kadm.Client, comps ...kadm.DescribeClientQuotaComponent) (map[string]map[string]float64, error) {
	t.Helper()
	qs, err := cl.DescribeClientQuotas(testCtx(t), false, comps)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]float64{}
	for _, q := range qs {
		vals := map[string]float64{}
		for _, v := range q.Values {
			vals[v.Key] = v.Value
		}
		out[q.Entity.String()] = vals
	}
	return out, nil
}

func TestClientQuotaAPIs(t *testing.T) {
	f := startAdminFixture(t)
	ctx := testCtx(t)
	root, ada, carl := f.admin(t, "root", "root-pw"), f.admin(t, "ada", "ada-pw"), f.admin(t, "carl", "carl-pw")

	// A user stands for its tenant.
	if r := altered(t, root, false, entity("user", "ada"), set(quota.ProducerByteRate, 1e7), set(quota.Topics, 5)); r.Err != nil {
		t.Fatalf("alter user=ada: %v: %s", r.Err, r.ErrMessage)
	}
	if r := altered(t, root, false, entity("tenant", "team-b"), set(quota.ConsumerByteRate, 2e6)); r.Err != nil {
		t.Fatalf("alter tenant=team-b: %v: %s", r.Err, r.ErrMessage)
	}
	if q, err := f.sb.Store.GetQuotas(ctx, "team-a"); err != nil || q.Limits[quota.ProducerByteRate] != 1e7 || q.Limits[quota.Topics] != 5 {
		t.Fatalf("team-a stores %+v, %v", q, err)
	}
	// validate_only writes nothing.
	if r := altered(t, root, true, entity("tenant", "team-b"), set(quota.Topics, 9)); r.Err != nil {
		t.Fatalf("validate tenant=team-b: %v: %s", r.Err, r.ErrMessage)
	}
	if q, _ := f.sb.Store.GetQuotas(ctx, "team-b"); len(q.Limits) != 1 {
		t.Fatalf("validate_only wrote: %+v", q.Limits)
	}

	// Refusals, each with a message; an entry with one bad op alters nothing.
	for _, c := range []struct {
		e    kadm.ClientQuotaEntity
		ops  []kadm.AlterClientQuotaOp
		want error
		msg  string
	}{
		{entity("client-id", "app"), []kadm.AlterClientQuotaOp{set(quota.ProducerByteRate, 1)}, kerr.InvalidRequest, "kept per tenant"},
		{entity("ip", "10.0.0.1"), []kadm.AlterClientQuotaOp{set(quota.ProducerByteRate, 1)}, kerr.InvalidRequest, "kept per tenant"},
		{kadm.ClientQuotaEntity{{Type: "user"}}, []kadm.AlterClientQuotaOp{set(quota.ProducerByteRate, 1)}, kerr.InvalidRequest, "default"},
		{entity("tenant", "team-a"), []kadm.AlterClientQuotaOp{set(quota.Topics, 1), set("producer_bytes_rate", 1)}, kerr.InvalidRequest, "unknown quota key"},
		{entity("tenant", "team-a"), []kadm.AlterClientQuotaOp{set(quota.ProducerByteRate, 0)}, kerr.InvalidRequest, "0 would refuse"},
		{entity("tenant", "team-a"), []kadm.AlterClientQuotaOp{{Key: "bogus", Remove: true}}, kerr.InvalidRequest, "unknown quota key"},
		{entity("tenant", "ghost"), []kadm.AlterClientQuotaOp{set(quota.Topics, 1)}, kerr.ResourceNotFound, "ghost"},
		{entity("user", "nobody"), []kadm.AlterClientQuotaOp{set(quota.Topics, 1)}, kerr.ResourceNotFound, "nobody"},
	} {
		r := altered(t, root, false, c.e, c.ops...)
		if !errors.Is(r.Err, c.want) || !strings.Contains(r.ErrMessage, c.msg) {
			t.Errorf("alter %s %v = %v: %q, want %v saying %q", c.e, c.ops, r.Err, r.ErrMessage, c.want, c.msg)
		}
	}
	if q, _ := f.sb.Store.GetQuotas(ctx, "team-a"); q.Limits[quota.Topics] != 5 {
		t.Fatalf("a refused entry altered team-a: %+v", q.Limits)
	}

	// Describe: a super user sees every tenant, by tenant entity.
	all, err := quotasOf(t, root)
	if err != nil || len(all) != 2 || all["{tenant=team-a}"][quota.Topics] != 5 || all["{tenant=team-b}"][quota.ConsumerByteRate] != 2e6 {
		t.Fatalf("root describes %v, %v", all, err)
	}
	carlName := "carl"
	byUser, err := quotasOf(t, root, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: &carlName})
	if err != nil || len(byUser) != 1 || byUser["{tenant=team-a}"][quota.ProducerByteRate] != 1e7 {
		t.Fatalf("root describes user=carl as %v, %v; want tenant=team-a's", byUser, err)
	}
	if _, err := quotasOf(t, root, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 2}); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("describe client-id = %v, want INVALID_REQUEST", err)
	}

	// A tenant admin sees its own tenant only, and cannot alter.
	own, err := quotasOf(t, ada)
	if err != nil || len(own) != 1 || own["{tenant=team-a}"] == nil {
		t.Fatalf("ada describes %v, %v; want team-a only", own, err)
	}
	teamB := "team-b"
	if other, err := quotasOf(t, ada, kadm.DescribeClientQuotaComponent{Type: "tenant", MatchName: &teamB}); err != nil || len(other) != 0 {
		t.Fatalf("ada describes tenant=team-b as %v, %v; want nothing", other, err)
	}
	if r := altered(t, ada, false, entity("tenant", "team-a"), set(quota.ProducerByteRate, 1e9)); !errors.Is(r.Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("ada raising her own quota = %v: %s, want CLUSTER_AUTHORIZATION_FAILED", r.Err, r.ErrMessage)
	}
	// An ordinary user without DESCRIBE_CONFIGS is refused.
	if _, err := quotasOf(t, carl); err == nil {
		t.Fatal("carl described quotas")
	}

	// An ACL a tenant grants itself never lets it alter quotas; the same
	// ACL in the system tenant makes an operator.
	created(t, ada, kadm.NewACLs().Allow("User:carl").Clusters().Operations(kadm.OpAlterConfigs, kadm.OpDescribeConfigs).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if r := altered(t, carl, false, entity("tenant", "team-a"), set(quota.Topics, 1000)); !errors.Is(r.Err, kerr.ClusterAuthorizationFailed) ||
		!strings.Contains(r.ErrMessage, "operator") {
		t.Fatalf("carl with ALTER_CONFIGS on team-a's cluster = %v: %s, want CLUSTER_AUTHORIZATION_FAILED", r.Err, r.ErrMessage)
	}
	if own, err := quotasOf(t, carl); err != nil || len(own) != 1 || own["{tenant=team-a}"] == nil {
		t.Fatalf("carl with DESCRIBE_CONFIGS describes %v, %v; want team-a only", own, err)
	}
	ops := meta.User{Name: "ops", Tenant: meta.SystemTenant, Scram: map[string]meta.ScramKeys{}}
	c, err := auth.NewScramCredential(auth.MechanismScramSHA512, "ops-pw", auth.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	ops.Scram[auth.MechanismScramSHA512] = meta.ScramKeys{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}
	if _, err := f.sb.Store.CreateUser(ctx, ops); err != nil {
		t.Fatal(err)
	}
	created(t, root, kadm.NewACLs().Allow("User:ops").Clusters().Operations(kadm.OpAlterConfigs, kadm.OpDescribeConfigs).
		ResourcePatternType(kadm.ACLPatternLiteral))
	opsCl := f.admin(t, "ops", "ops-pw")
	if r := altered(t, opsCl, false, entity("tenant", "team-b"), set(quota.Topics, 4)); r.Err != nil {
		t.Fatalf("an operator of the system tenant altering team-b: %v: %s", r.Err, r.ErrMessage)
	}
	if everyone, err := quotasOf(t, opsCl); err != nil || len(everyone) != 2 {
		t.Fatalf("an operator describes %v, %v; want both tenants", everyone, err)
	}

	// The broker's quota table follows the store.
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for v, _ := f.sb.Quotas().Limits("team-a").Get(quota.Topics); v != 5; v, _ = f.sb.Quotas().Limits("team-a").Get(quota.Topics) {
		select {
		case <-deadline:
			t.Fatalf("the broker's table has team-a topics = %v, want 5", v)
		case <-tick.C:
		}
	}
}

// TestClientQuotaAPIsWithoutSecurity: a broker that enforces no ACLs (the
// development default) lets its anonymous callers alter and describe every
// tenant's quotas, as it lets them do everything else.
func TestClientQuotaAPIsWithoutSecurity(t *testing.T) {
	sb := startSecureBroker(t, nil, kafka.WithCredentials(testUsers.lookup(t)))
	ctx := testCtx(t)
	if _, err := sb.Store.CreateTenant(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(sb.client(t, "PLAINTEXT", kgo.RequestRetries(0)))
	if r := altered(t, adm, false, entity("tenant", "team-a"), set(quota.Topics, 7)); r.Err != nil {
		t.Fatalf("anonymous alter without security: %v: %s", r.Err, r.ErrMessage)
	}
	got, err := quotasOf(t, adm)
	if err != nil || got["{tenant=team-a}"][quota.Topics] != 7 {
		t.Fatalf("anonymous describe without security: %v, %v", got, err)
	}
}
