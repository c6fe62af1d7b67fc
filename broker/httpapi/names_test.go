package httpapi

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	acme  = tenantScope{tenant: "acme"}
	deflt = tenantScope{tenant: "default"}
	super = tenantScope{tenant: "system", unscoped: true}
)

// TestTenantScopeInternal: a scoped client's names are qualified with its
// tenant (the default tenant's stay unqualified), a name with '~' is
// refused as invalid_name, and a super user's pass as they are.
func TestTenantScopeInternal(t *testing.T) {
	for _, tc := range []struct {
		s          tenantScope
		in, want   string
		wantRefuse bool
	}{
		{acme, "orders", "acme~orders", false},
		{acme, "", "", false},
		{acme, "globex~orders", "", true},
		{acme, "~", "", true},
		{deflt, "orders", "orders", false},
		{deflt, "acme~orders", "", true},
		{super, "acme~orders", "acme~orders", false},
		{super, "orders", "orders", false},
	} {
		got, err := tc.s.internal("topic", tc.in)
		var ae *APIError
		refused := errors.As(err, &ae) && ae.Status == 400 && ae.Code == "invalid_name"
		if got != tc.want || refused != tc.wantRefuse || (err != nil) != tc.wantRefuse {
			t.Errorf("%+v.internal(%q) = %q, %v; want %q, refused %v", tc.s, tc.in, got, err, tc.want, tc.wantRefuse)
		}
	}
}

// TestTenantScopeShow: an internal name is shown to a tenant only if it is
// its own in the canonical spelling, unqualified; a super user sees every
// name as it is. What a client sends comes back unchanged.
func TestTenantScopeShow(t *testing.T) {
	for _, tc := range []struct {
		s        tenantScope
		in, want string
		ok       bool
	}{
		{acme, "acme~orders", "orders", true},
		{acme, "acme~a~b", "a~b", true}, // a group id only a super user could make
		{acme, "globex~orders", "", false},
		{acme, "orders", "", false},
		{acme, "", "", true},
		{deflt, "orders", "orders", true},
		{deflt, "default~orders", "", false}, // a second spelling of orders
		{deflt, "default~a~b", "a~b", true},
		{deflt, "acme~orders", "", false},
		{super, "acme~orders", "acme~orders", true},
		{super, "orders", "orders", true},
	} {
		got, ok := tc.s.show(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%+v.show(%q) = %q, %v; want %q, %v", tc.s, tc.in, got, ok, tc.want, tc.ok)
		}
	}
	for _, s := range []tenantScope{acme, deflt, super} {
		for _, name := range []string{"orders", "a.b_c-d", "x"} {
			q, err := s.internal("topic", name)
			if err != nil {
				t.Fatal(err)
			}
			if back, ok := s.show(q); !ok || back != name {
				t.Errorf("%+v: %q → %q → %q, %v", s, name, q, back, ok)
			}
		}
	}
}

// TestTenantScopeMessage: the tenant's own prefixes leave a message; one
// that still names another tenant's resource is withheld; a super user's
// messages are kept.
func TestTenantScopeMessage(t *testing.T) {
	for _, tc := range []struct {
		s        tenantScope
		in, want string
	}{
		{acme, "UNKNOWN_TOPIC_OR_PARTITION: acme~orders-0", "UNKNOWN_TOPIC_OR_PARTITION: orders-0"},
		{acme, `offset 9 of "acme~orders" in group acme~g`, `offset 9 of "orders" in group g`},
		{acme, "topic globex~orders", withheldMessage},
		{acme, "xacme~orders", withheldMessage}, // not where a name starts
		{acme, "no names here", "no names here"},
		{acme, "", ""},
		{deflt, "unknown topic orders", "unknown topic orders"},
		{super, "topic globex~orders", "topic globex~orders"},
	} {
		if got := tc.s.message(tc.in); got != tc.want {
			t.Errorf("%+v.message(%q) = %q, want %q", tc.s, tc.in, got, tc.want)
		}
	}
}

// TestMemberTopics: member metadata holds the group's tenant's names.
func TestMemberTopics(t *testing.T) {
	for _, tc := range []struct{ group, local, internal string }{
		{"acme~g", "orders", "acme~orders"},
		{"g", "orders", "orders"},
		{"default~a~b", "orders", "orders"},
	} {
		if got := memberTopic(tc.group, tc.local); got != tc.internal {
			t.Errorf("memberTopic(%q, %q) = %q, want %q", tc.group, tc.local, got, tc.internal)
		}
		if got, ok := memberLocal(tc.group, tc.internal); !ok || got != tc.local {
			t.Errorf("memberLocal(%q, %q) = %q, %v; want %q", tc.group, tc.internal, got, ok, tc.local)
		}
	}
	if _, ok := memberLocal("acme~g", "globex~orders"); ok {
		t.Error("a topic of globex was written into a group of acme")
	}
	a := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: "orders", Partitions: []int32{0, 1}}}}
	if got := showAssignment(acme, "acme~g", a); len(got) != 1 || got[0].Topic != "orders" {
		t.Errorf("acme sees its assignment as %v", got)
	}
	if got := showAssignment(super, "acme~g", a); len(got) != 1 || got[0].Topic != "acme~orders" {
		t.Errorf("a super user sees acme's assignment as %v", got)
	}
	if got := showAssignment(acme, "globex~g", a); len(got) != 0 {
		t.Errorf("acme sees globex's assignment as %v", got)
	}
}

// TestShowLags: a tenant's lag view leaves out other tenants' topics and
// shows its own unqualified.
func TestShowLags(t *testing.T) {
	lags := []groupPartitionLag{
		{PartitionLag: PartitionLag{Topic: "acme~orders", Partition: 0}},
		{PartitionLag: PartitionLag{Topic: "globex~orders", Partition: 0}},
		{PartitionLag: PartitionLag{Topic: "orders", Partition: 1}},
		{PartitionLag: PartitionLag{Topic: "acme~audit", Partition: 2}, Error: "node 2 does not lead acme~audit-2"},
	}
	got := acme.showLags(slices.Clone(lags))
	want := []groupPartitionLag{
		{PartitionLag: PartitionLag{Topic: "orders", Partition: 0}},
		{PartitionLag: PartitionLag{Topic: "audit", Partition: 2}, Error: "node 2 does not lead audit-2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("acme.showLags = %+v, want %+v", got, want)
	}
	if got := super.showLags(slices.Clone(lags)); !reflect.DeepEqual(got, lags) {
		t.Errorf("super.showLags = %+v, want every entry as it is", got)
	}
}

// TestBodyNames: each route's body rewriter qualifies exactly the topic
// names of the handler's request type and keeps every other field.
func TestBodyNames(t *testing.T) {
	qualify := func(n *string) error {
		q, err := acme.internal("topic", *n)
		*n = q
		return err
	}
	for _, tc := range []struct {
		name     string
		rule     bodyNames
		in, want string
		decode   func([]byte) (any, error)
	}{
		{"create", createTopicName, `{"name":"orders","partitions":3}`,
			`{"name":"acme~orders","partitions":3,"replication_factor":0,"configs":null}`, nil},
		{"join", joinTopics, `{"topics":["a","b"],"member_id":"m"}`,
			`{"topics":["acme~a","acme~b"],"member_id":"m","session_timeout_ms":0,"rebalance_timeout_ms":0}`, nil},
		{"fetch", fetchTopics, `{"member_id":"m","generation":2,"topic":"orders","partition":1,"offset":5}`,
			`{"member_id":"m","generation":2,"topic":"acme~orders","partition":1,"offset":5,"max_bytes":0,"wait_ms":0}`, nil},
		{"commit", commitTopics, `{"member_id":"m","generation":1,"offsets":[{"topic":"a","partition":0,"offset":4},{"topic":"b","partition":1,"offset":2}]}`,
			`{"member_id":"m","generation":1,"offsets":[{"topic":"acme~a","partition":0,"offset":4},{"topic":"acme~b","partition":1,"offset":2}]}`, nil},
		{"reset", resetTopics, `{"topic":"orders","to":"earliest"}`,
			`{"topic":"acme~orders","partition":null,"offset":null,"timestamp_ms":null,"to":"earliest"}`, nil},
	} {
		got, err := tc.rule([]byte(tc.in), qualify)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.name, got, err, tc.want)
		}
	}
	// A refused name refuses the body; a malformed body is the decoder's 400.
	if _, err := fetchTopics([]byte(`{"topic":"globex~orders"}`), qualify); err == nil {
		t.Error("a body naming globex~orders was rewritten")
	}
	if _, err := fetchTopics([]byte(`{"topic":`), qualify); err == nil {
		t.Error("a malformed body was rewritten")
	}
	if _, err := fetchTopics([]byte(`{"topic":"a","extra":1}`), qualify); err == nil {
		t.Error("a body with an unknown field was rewritten")
	}
}

// FuzzBodyNames: whatever the client sends, a body the rewriter accepts is
// encoded again into one the handler's decoder reads, and rewriting that
// again with no change gives the same bytes (the stage and the handler
// read the same request).
func FuzzBodyNames(f *testing.F) {
	for _, seed := range []string{
		`{"name":"orders","partitions":3,"configs":{"retention.ms":"1"}}`,
		`{"topics":["a","b"],"member_id":"m"}`,
		`{"member_id":"m","generation":2,"topic":"orders","partition":1}`,
		`{"member_id":"m","generation":1,"offsets":[{"topic":"a","partition":0,"offset":4}]}`,
		`{"topic":"orders","timestamp_ms":17}`,
		`{"topic":"<&>\u2028"}`,
	} {
		f.Add([]byte(seed))
	}
	rules := []bodyNames{createTopicName, joinTopics, fetchTopics, commitTopics, resetTopics}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for i, rule := range rules {
			keep := func(*string) error { return nil }
			once, err := rule(raw, keep)
			if err != nil {
				continue
			}
			twice, err := rule(once, keep)
			if err != nil {
				t.Fatalf("rule %d: %q was accepted, its encoding %q is refused: %v", i, raw, once, err)
			}
			if !bytes.Equal(once, twice) {
				t.Fatalf("rule %d: %q encodes as %q, then as %q", i, raw, once, twice)
			}
		}
	})
}
