package scope

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic IDs of the fake registry: each tenant has a topic "orders".
var (
	idAcme      = [16]byte{0xa1, 15: 1}
	idAcmePay   = [16]byte{0xa1, 15: 2}
	idBob       = [16]byte{0xb0, 15: 1}
	idDefault   = [16]byte{0xd0, 15: 1}
	idNone      = [16]byte{0xee, 15: 1} // no topic has it
	scopeTopics = map[[16]byte]string{idAcme: "acme~orders", idAcmePay: "acme~payments", idBob: "bob~orders", idDefault: "orders"}
)

func scopeOwner(id [16]byte) (string, bool) {
	name, ok := scopeTopics[id]
	return name, ok
}

var (
	acmeScope    = Scope{Tenant: "acme", TopicOwner: scopeOwner}
	defaultScope = Scope{Tenant: "default", TopicOwner: scopeOwner}
	kstr         = kmsg.StringPtr
)

type scopeCase struct {
	name     string
	scope    Scope
	req      kmsg.Request  // as the client sends it
	wantReq  kmsg.Request  // as the handler must see it
	resp     kmsg.Response // as the broker answers, internal names of several tenants
	wantResp kmsg.Response // as the client must see it
}

// versioned sets the version of a request or response built as a literal.
func withVersion[T interface{ SetVersion(int16) }](v int16, m T) T {
	m.SetVersion(v)
	return m
}

func TestScopeTable(t *testing.T) {
	for _, tc := range scopeCases() {
		t.Run(tc.name, func(t *testing.T) {
			refused, err := tc.scope.Request(tc.req)
			if err != nil {
				t.Fatalf("Request: %v", err)
			}
			if !reflect.DeepEqual(tc.req, tc.wantReq) {
				t.Fatalf("request as the handler sees it:\n got %s\nwant %s", showMsg(tc.req), showMsg(tc.wantReq))
			}
			if tc.resp == nil {
				return
			}
			tc.scope.Response(tc.resp, refused)
			if !reflect.DeepEqual(tc.resp, tc.wantResp) {
				t.Fatalf("response as the client sees it:\n got %s\nwant %s", showMsg(tc.resp), showMsg(tc.wantResp))
			}
		})
	}
}

// TestScopeUnscoped: a super user's requests and responses pass unchanged,
// byte for byte, whatever tenants they name.
func TestScopeUnscoped(t *testing.T) {
	su := Scope{Unscoped: true, TopicOwner: scopeOwner}
	for _, tc := range scopeCases() {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.req.AppendTo(nil)
			refused, err := su.Request(tc.req)
			if err != nil || refused != nil {
				t.Fatalf("Request = %v, %v; want nothing refused", refused, err)
			}
			if after := tc.req.AppendTo(nil); string(after) != string(before) {
				t.Fatalf("a super user's request changed:\n got %s", showMsg(tc.req))
			}
			if tc.resp == nil {
				return
			}
			before = tc.resp.AppendTo(nil)
			su.Response(tc.resp, nil)
			if after := tc.resp.AppendTo(nil); string(after) != string(before) {
				t.Fatalf("a super user's response changed:\n got %s", showMsg(tc.resp))
			}
		})
	}
}

// TestScopeForeignTopicID: an ID of another tenant's topic, or of no topic,
// never reaches the handler, and the client is answered UNKNOWN_TOPIC_ID
// for exactly the ID it sent; without a TopicOwner every ID is refused.
func TestScopeForeignTopicID(t *testing.T) {
	for _, tt := range []struct {
		name      string
		scope     Scope
		id        [16]byte
		wantKnown bool
	}{
		{"own", acmeScope, idAcme, true},
		{"another tenant's", acmeScope, idBob, false},
		{"the default tenant's, asked by acme", acmeScope, idDefault, false},
		{"acme's, asked by the default tenant", defaultScope, idAcme, false},
		{"no topic's", acmeScope, idNone, false},
		{"own, without TopicOwner", Scope{Tenant: "acme"}, idAcme, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := withVersion(13, kmsg.NewPtrFetchRequest())
			req.Topics = []kmsg.FetchRequestTopic{{TopicID: tt.id, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}
			refused, err := tt.scope.Request(req)
			if err != nil {
				t.Fatal(err)
			}
			seen := req.Topics[0].TopicID
			if (seen == tt.id) != tt.wantKnown {
				t.Fatalf("the handler sees %x for %x; want it passed=%v", seen, tt.id, tt.wantKnown)
			}
			if tt.wantKnown {
				return
			}
			if _, ok := scopeTopics[seen]; ok {
				t.Fatalf("placeholder %x is a topic's ID", seen)
			}
			// The handler answers the placeholder as the unknown ID it is.
			resp := withVersion(13, kmsg.NewPtrFetchResponse())
			rt := kmsg.NewFetchResponseTopic()
			rt.TopicID = seen
			for _, p := range []int32{0, 1} {
				part := kmsg.NewFetchResponseTopicPartition()
				part.Partition = p
				part.ErrorCode = kerr.UnknownTopicID.Code
				part.RecordBatches = []byte{}
				rt.Partitions = append(rt.Partitions, part)
			}
			resp.Topics = []kmsg.FetchResponseTopic{rt}
			tt.scope.Response(resp, refused)
			got := resp.Topics[0]
			if got.TopicID != tt.id || len(got.Partitions) != 2 || got.Partitions[1].ErrorCode != kerr.UnknownTopicID.Code {
				t.Fatalf("client sees %s; want its ID %x answered UNKNOWN_TOPIC_ID", showMsg(resp), tt.id)
			}
		})
	}
}

func TestScopeRefusesWhatItCannotSee(t *testing.T) {
	for _, tt := range []struct {
		name  string
		scope Scope
		req   kmsg.Request
	}{
		{"OffsetCommit v10 names topics by ID", acmeScope, withVersion(10, kmsg.NewPtrOffsetCommitRequest())},
		{"OffsetFetch v10 names topics by ID", acmeScope, withVersion(10, kmsg.NewPtrOffsetFetchRequest())},
		{"an API the stage does not know", acmeScope, kmsg.NewPtrDescribeClusterRequest()},
		{"no tenant", Scope{}, kmsg.NewPtrMetadataRequest()},
		{"an invalid tenant", Scope{Tenant: "Acme~"}, kmsg.NewPtrMetadataRequest()},
	} {
		if _, err := tt.scope.Request(tt.req); !errors.Is(err, ErrNotScoped) {
			t.Errorf("%s: Request = %v, want ErrNotScoped", tt.name, err)
		}
	}
	if _, err := (Scope{Unscoped: true}).Request(kmsg.NewPtrDescribeClusterRequest()); err != nil {
		t.Errorf("a super user's request of any kind passes: %v", err)
	}
}

// TestScopeTableVersions: no API is scoped past the versions kmsg knows
// (broker/kafka's TestScopeCoversDispatch checks the served ones are all
// covered).
func TestScopeTableVersions(t *testing.T) {
	for key, e := range scopeTable {
		if max := kmsg.RequestForKey(key).MaxVersion(); e.maxVersion > max {
			t.Errorf("%s scoped up to v%d, past kmsg's v%d", kmsg.NameForKey(key), e.maxVersion, max)
		}
	}
}

func TestScrubMessage(t *testing.T) {
	for _, tt := range []struct {
		tenant, in, want string
		ok               bool
	}{
		{"acme", `topic "acme~orders": boom`, `topic "orders": boom`, true},
		{"acme", "acme~orders", "orders", true},
		{"acme", "no names here", "no names here", true},
		{"acme", `topic "bob~orders"`, "", false},
		{"acme", `topic "bacme~orders"`, "", false}, // not acme's: the prefix must start a name
		{"acme", `"acme~orders" and "bob~x"`, "", false},
		{"acme", `group "acme~my~group"`, "", false}, // own, but the separator stays: dropped
		{"default", `topic "orders"`, `topic "orders"`, true},
		{"default", `topic "acme~orders"`, "", false},
		{"default", `group "default~a~b"`, "", false},
	} {
		got, ok := scrubMessage(tt.in, tt.tenant)
		if ok != tt.ok || ok && got != tt.want {
			t.Errorf("scrubMessage(%q, %q) = %q, %v; want %q, %v", tt.in, tt.tenant, got, ok, tt.want, tt.ok)
		}
	}
}

func showMsg(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
