package broker

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// tenantHTTPSetup creates, as the super user admin, the tenants and one
// user per tenant (password "<user>-pw") over the HTTP admin API of base,
// and returns a caller per user. A user is returned once a broker
// authenticates it (the brokers learn users through an etcd watch).
func tenantHTTPSetup(t *testing.T, admin httpCaller, users map[string]string) map[string]httpCaller {
	t.Helper()
	tenants := map[string]bool{}
	for _, tenant := range users {
		if !tenants[tenant] {
			tenants[tenant] = true
			admin.must(http.StatusCreated, "POST", "/v1/tenants", fmt.Sprintf(`{"name":%q}`, tenant))
		}
	}
	out := map[string]httpCaller{}
	for user, tenant := range users {
		admin.must(http.StatusCreated, "POST", "/v1/users", fmt.Sprintf(`{"name":%q,"tenant":%q,"password":%q}`, user, tenant, user+"-pw"))
		out[user] = admin.with(basic(user, user+"-pw"))
	}
	return out
}

// awaitAuthenticated polls c until base answers it with something other
// than 401.
func awaitAuthenticated(t *testing.T, c httpCaller) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, out, _ := c.call("GET", "/v1/brokers", "")
		if code != http.StatusUnauthorized {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still 401 after 10s: %v", c.base, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// topicNames lists the names of GET /v1/topics.
func topicNames(t *testing.T, c httpCaller) []string {
	t.Helper()
	var names []string
	for _, tp := range c.must(http.StatusOK, "GET", "/v1/topics", "")["topics"].([]any) {
		names = append(names, tp.(map[string]any)["name"].(string))
	}
	return names
}

// groupNames lists the names of GET /v1/groups.
func groupNames(t *testing.T, c httpCaller) []string {
	t.Helper()
	var names []string
	for _, g := range c.must(http.StatusOK, "GET", "/v1/groups", "")["groups"].([]any) {
		names = append(names, g.(map[string]any)["group"].(string))
	}
	return names
}

// joinFetch joins group with topics and fetches partition 0 of topic from
// the group's position; it returns the member reference and the payloads.
func joinFetch(t *testing.T, c httpCaller, group, topic string) (ref string, payloads []string) {
	t.Helper()
	m := c.must(http.StatusOK, "POST", "/v1/groups/"+group+"/members:join", fmt.Sprintf(`{"topics":[%q],"session_timeout_ms":30000}`, topic))
	if a, _ := m["assignment"].([]any); len(a) != 1 || a[0].(map[string]any)["topic"] != topic {
		t.Fatalf("join %s: assignment %v, want %s", group, m["assignment"], topic)
	}
	ref = fmt.Sprintf(`"member_id":%q,"generation":%s`, m["member_id"], jsonNum(m["generation"]))
	f := c.must(http.StatusOK, "POST", "/v1/groups/"+group+"/messages:fetch", fmt.Sprintf(`{%s,"topic":%q,"partition":0}`, ref, topic))
	for _, msg := range f["messages"].([]any) {
		payloads = append(payloads, msg.(map[string]any)["payload"].(string))
	}
	return ref, payloads
}

// TestTenantsHTTPNamespaces: two tenants each create a topic "orders" and
// use a group "billing" over HTTP. Each publishes and reads only its own
// records, lists only its own names (unqualified), and every probe of the
// other tenant's names is refused; the super user sees both qualified; a
// record published over HTTP is read by the tenant's Kafka client under
// the same plain name. On the old code a tenant's user got 403
// tenant_not_served.
func TestTenantsHTTPNamespaces(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.Listeners = "SASL_PLAINTEXT://" + cfg.KafkaListen
	cfg.KafkaListen, cfg.KafkaAdvertise = "", ""
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = true // isolation here is by names, not ACLs
	cfg.AdminPasswordFile = writeFile(t, "admin-password", "admin-pw\n")
	b := startBroker(t, cfg)
	admin := httpCaller{t: t, client: http.DefaultClient, base: "http://" + b.Cfg.HTTPListen}.with(basic("admin", "admin-pw"))
	users := tenantHTTPSetup(t, admin, map[string]string{"ann": "acme", "gus": "globex"})
	ann, gus := users["ann"], users["gus"]
	awaitAuthenticated(t, ann)
	awaitAuthenticated(t, gus)

	for who, c := range users {
		if out := c.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"orders","partitions":1}`); out["name"] != "orders" {
			t.Fatalf("%s created %v, want the name orders", who, out["name"])
		}
		c.must(http.StatusOK, "POST", "/v1/topics/orders/messages:publish", `{"messages":[{"payload":"from `+who+`"}]}`)
	}
	gus.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"private","partitions":1}`)
	gus.must(http.StatusOK, "POST", "/v1/topics/private/messages:publish", `{"messages":[{"payload":"gus only"}]}`)

	// Records, groups and offsets never cross.
	refs := map[string]string{}
	for who, c := range users {
		ref, payloads := joinFetch(t, c, "billing", "orders")
		if !slices.Equal(payloads, []string{"from " + who}) {
			t.Fatalf("%s fetched %v, want only its own record", who, payloads)
		}
		refs[who] = ref
		c.must(http.StatusOK, "POST", "/v1/groups/billing/offsets:commit", fmt.Sprintf(`{%s,"offsets":[{"topic":"orders","partition":0,"offset":1}]}`, ref))
		lag := c.must(http.StatusOK, "GET", "/v1/groups/billing/lag", "")
		parts, _ := lag["partitions"].([]any)
		if lag["group"] != "billing" || len(parts) != 1 || parts[0].(map[string]any)["topic"] != "orders" || parts[0].(map[string]any)["committed"].(float64) != 1 {
			t.Fatalf("%s's lag of billing: %v, want orders-0 committed at 1", who, lag)
		}
		d := c.must(http.StatusOK, "GET", "/v1/groups/billing", "")
		if d["group"] != "billing" || !strings.Contains(fmt.Sprint(d["offsets"]), "topic:orders") || strings.Contains(fmt.Sprint(d), "~") {
			t.Fatalf("%s describes billing as %v", who, d)
		}
		c.must(http.StatusOK, "POST", "/v1/groups/billing/members:leave", fmt.Sprintf(`{%s}`, ref))
		if out := c.must(http.StatusOK, "POST", "/v1/groups/billing/offsets:reset", `{"topic":"orders","to":"earliest"}`); out["topic"] != "orders" {
			t.Fatalf("%s reset %v, want the topic orders", who, out)
		}
	}
	// Listings and descriptions show each tenant its own names alone.
	ids := map[string]any{}
	for who, c := range users {
		want := []string{"orders"}
		if who == "gus" {
			want = []string{"orders", "private"}
		}
		if got := topicNames(t, c); !slices.Equal(got, want) {
			t.Fatalf("%s lists topics %v, want %v", who, got, want)
		}
		if got := groupNames(t, c); !slices.Equal(got, []string{"billing"}) {
			t.Fatalf("%s lists groups %v, want [billing]", who, got)
		}
		d := c.must(http.StatusOK, "GET", "/v1/topics/orders", "")
		if d["name"] != "orders" {
			t.Fatalf("%s describes orders as %v", who, d["name"])
		}
		ids[who] = d["topic_id"]
	}
	if ids["ann"] == ids["gus"] {
		t.Fatal("both tenants' orders have one topic ID: they are one topic")
	}
	// The super user sees every tenant's names qualified.
	all := topicNames(t, admin)
	for _, want := range []string{"acme~orders", "globex~orders", "globex~private"} {
		if !slices.Contains(all, want) {
			t.Fatalf("the super user lists %v, want %s among them", all, want)
		}
	}
	if g := groupNames(t, admin); !slices.Contains(g, "acme~billing") || !slices.Contains(g, "globex~billing") {
		t.Fatalf("the super user lists groups %v", g)
	}
	if d := admin.must(http.StatusOK, "GET", "/v1/topics/acme~orders", ""); d["topic_id"] != ids["ann"] {
		t.Fatalf("the super user's acme~orders is %v, want ann's %v", d["topic_id"], ids["ann"])
	}

	// Probes by the other tenant's internal name: 400 invalid_name, even
	// with the header a forwarding broker sets.
	forwarded := ann.with(func(r *http.Request) {
		r.SetBasicAuth("ann", "ann-pw")
		r.Header.Set("X-Sluice-Forwarded-By", "1")
	})
	for _, c := range []httpCaller{ann, forwarded} {
		for _, p := range []struct{ method, path, body string }{
			{"POST", "/v1/topics/globex~orders/messages:publish", onePublish},
			{"GET", "/v1/topics/globex~orders", ""},
			{"POST", "/v1/topics", `{"name":"globex~orders"}`},
			{"GET", "/v1/groups/globex~billing/lag", ""},
			{"GET", "/v1/groups/globex~billing", ""},
			{"POST", "/v1/groups/globex~billing/offsets:commit", `{"member_id":"m","generation":1,"offsets":[{"topic":"orders","partition":0,"offset":0}]}`},
			{"POST", "/v1/groups/billing/messages:fetch", `{"member_id":"m","generation":1,"topic":"globex~orders","partition":0}`},
			{"POST", "/v1/groups/billing/offsets:reset", `{"topic":"globex~private","to":"earliest"}`},
			{"POST", "/v1/groups/billing/members:join", `{"topics":["globex~private"]}`},
		} {
			code, out, _ := c.call(p.method, p.path, p.body)
			if ec, _ := errorCode(out); code != http.StatusBadRequest || ec != "invalid_name" {
				t.Errorf("ann: %s %s: %d %v, want 400 invalid_name", p.method, p.path, code, out)
			}
		}
	}
	// Probes by a name only the other tenant has: not found.
	for _, p := range []struct{ method, path, body string }{
		{"POST", "/v1/topics/private/messages:publish", onePublish},
		{"GET", "/v1/topics/private", ""},
		{"POST", "/v1/groups/probe/members:join", `{"topics":["private"]}`},
		{"POST", "/v1/groups/billing/offsets:reset", `{"topic":"private","to":"earliest"}`},
	} {
		code, out, _ := ann.call(p.method, p.path, p.body)
		if code != http.StatusNotFound || strings.Contains(fmt.Sprint(out), "globex") {
			t.Errorf("ann: %s %s: %d %v, want 404 naming nothing of globex", p.method, p.path, code, out)
		}
	}
	// There is no route that deletes a topic over HTTP, and the internal
	// routes are not on the public listener.
	for _, p := range []struct{ method, path, body string }{
		{"DELETE", "/v1/topics/orders", ""},
		{"POST", "/internal/v1/partitions/globex~orders/0/read", `{"offset":0}`},
		{"GET", "/internal/v1/partitions?topic=globex~orders", ""},
	} {
		code, out, _ := ann.call(p.method, p.path, p.body)
		if code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Errorf("ann: %s %s: %d %v, want 404 or 405", p.method, p.path, code, out)
		}
	}
	// ann's view of a group only globex has is an empty group of acme's.
	for _, p := range []string{"/v1/groups/billing/lag", "/v1/groups/billing"} {
		if out := ann.must(http.StatusOK, "GET", p, ""); strings.Contains(fmt.Sprint(out), "private") {
			t.Errorf("ann: GET %s shows globex's topic: %v", p, out)
		}
	}

	// Both protocols agree on the stored name: ann's Kafka client reads
	// under "orders" what ann published over HTTP.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := testClient(t, b, kgo.SASL(scram.Auth{User: "ann", Pass: "ann-pw"}.AsSha512Mechanism()),
		kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fetches := cl.PollRecords(ctx, 10)
	if err := fetches.Err(); err != nil {
		t.Fatalf("ann's Kafka client: %v", err)
	}
	recs := fetches.Records()
	if len(recs) != 1 || string(recs[0].Value) != "from ann" || recs[0].Topic != "orders" {
		t.Fatalf("ann's Kafka client read %v, want the record ann published over HTTP", recs)
	}
	// And on the group: what ann commits over Kafka to billing is the
	// offset ann's HTTP lag view of billing reads; gus's billing is not
	// touched.
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := kadm.NewClient(cl).CommitOffsets(ctx, "billing", os); err != nil {
		t.Fatalf("ann's Kafka commit: %v", err)
	}
	for who, want := range map[string]float64{"ann": 1, "gus": 0} {
		lag := users[who].must(http.StatusOK, "GET", "/v1/groups/billing/lag", "")
		parts, _ := lag["partitions"].([]any)
		if len(parts) != 1 || parts[0].(map[string]any)["topic"] != "orders" || parts[0].(map[string]any)["committed"] != want {
			t.Fatalf("%s's lag of billing after ann's Kafka commit: %v, want orders-0 committed at %v", who, lag, want)
		}
	}
}

// TestTenantsHTTPForwarded: in a three-broker cluster with security on, a
// tenant publishes (plainly and idempotently), joins, fetches, commits and
// reads lag through a broker that leads nothing of its topic and does not
// coordinate its group, so every part is forwarded (the publish and the
// reads over the inter-broker listener with the internal name, the group
// calls to the coordinator's public API as the client sent them). Each
// tenant's "orders" gets its own records alone.
func TestTenantsHTTPForwarded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	pw := writeFile(t, "admin-password", "admin-pw\n")
	c := startTestClusterWith(t, 3, func(cfg *Config) {
		cfg.SecurityEnabled = true
		cfg.AllowEveryoneIfNoACLFound = true
		cfg.AdminPasswordFile = pw
	})
	caller := func(b *Broker) httpCaller {
		return httpCaller{t: t, client: http.DefaultClient, base: httpBase(b)}
	}
	admin := caller(c.brokers[0]).with(basic("admin", "admin-pw"))
	awaitAuthenticated(t, admin)
	users := tenantHTTPSetup(t, admin, map[string]string{"ann": "acme", "gus": "globex"})
	for _, c := range users {
		c.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"orders","partitions":1,"replication_factor":1}`)
	}
	host := hostOf(t, c, "globex~orders", 0)
	// via hosts no replica of globex~orders; the group's coordinator is a
	// third broker where one can be found.
	via := c.brokers[host.Cfg.NodeID%3]
	group := "billing"
	for i := 0; i < 100; i++ {
		g := fmt.Sprintf("billing-%d", i)
		if co := via.GroupCoordinator("globex~" + g).NodeID; co != via.Cfg.NodeID {
			group = g
			break
		}
	}
	gus, ann := users["gus"], users["ann"]
	gus.base, ann.base = httpBase(via), httpBase(via)
	awaitAuthenticated(t, gus)
	awaitAuthenticated(t, ann)

	pub := gus.must(http.StatusOK, "POST", "/v1/topics/orders/messages:publish", `{"messages":[{"payload":"g1"},{"payload":"g2"}]}`)
	for _, r := range pub["results"].([]any) {
		if r.(map[string]any)["status"] != "ok" {
			t.Fatalf("forwarded publish: %v", pub)
		}
	}
	pid := gus.must(http.StatusOK, "POST", "/v1/producers", `{}`)["producer_id"]
	idem := gus.must(http.StatusOK, "POST", "/v1/topics/orders/messages:publish",
		fmt.Sprintf(`{"producer_id":%s,"producer_epoch":0,"messages":[{"payload":"g3","sequence":0}]}`, jsonNum(pid)))
	if r := idem["results"].([]any)[0].(map[string]any); r["status"] != "ok" {
		t.Fatalf("forwarded idempotent publish: %v", idem)
	}
	ann.must(http.StatusOK, "POST", "/v1/topics/orders/messages:publish", `{"messages":[{"payload":"a1"}]}`)
	if hw := c.leaderHW(t, "globex~orders", 0); hw != 3 {
		t.Fatalf("globex~orders high watermark %d at its leader, want 3", hw)
	}

	ref, payloads := joinFetch(t, gus, group, "orders")
	if !slices.Equal(payloads, []string{"g1", "g2", "g3"}) {
		t.Fatalf("gus fetched %v through node %d, want g1 g2 g3", payloads, via.Cfg.NodeID)
	}
	gus.must(http.StatusOK, "POST", "/v1/groups/"+group+"/offsets:commit", fmt.Sprintf(`{%s,"offsets":[{"topic":"orders","partition":0,"offset":2}]}`, ref))
	lag := gus.must(http.StatusOK, "GET", "/v1/groups/"+group+"/lag", "")
	parts, _ := lag["partitions"].([]any)
	if lag["group"] != group || len(parts) != 1 {
		t.Fatalf("lag through node %d: %v", via.Cfg.NodeID, lag)
	}
	if p := parts[0].(map[string]any); p["topic"] != "orders" || p["lag"].(float64) != 1 || p["error"] != nil {
		t.Fatalf("lag through node %d: %v, want orders at lag 1", via.Cfg.NodeID, p)
	}
	d := gus.must(http.StatusOK, "GET", "/v1/topics/orders", "")
	if ps := d["partitions"].([]any); d["name"] != "orders" || len(ps) != 1 || ps[0].(map[string]any)["high_watermark"] != float64(3) {
		t.Fatalf("gus describes orders through node %d as %v", via.Cfg.NodeID, d)
	}
	if g := groupNames(t, gus); !slices.Equal(g, []string{group}) {
		t.Fatalf("gus lists groups %v through node %d, want [%s]", g, via.Cfg.NodeID, group)
	}
	// ann's orders holds ann's record alone.
	if _, payloads := joinFetch(t, ann, group, "orders"); !slices.Equal(payloads, []string{"a1"}) {
		t.Fatalf("ann fetched %v, want a1", payloads)
	}
}
