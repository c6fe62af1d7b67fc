package scope

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
)

// scopeNameFields are the kmsg field names that hold a tenant's topic name,
// group id or transactional id (ResourceName only beside a topic or group
// ConfigResourceType). The oracle below finds them by reflection, apart
// from the stage's hand-written table, so a field the table forgot shows.
var scopeNameFields = map[string]bool{
	"Topic": true, "TopicNames": true, "Group": true, "Groups": true, "TransactionID": true,
	"TransactionalID": true, "CoordinatorKey": true, "CoordinatorKeys": true, "Key": true, "ResourceName": true,
}

// oracleFinds is what the oracle finds in a kmsg message.
type oracleFinds struct {
	names    []string   // non-empty names
	ids      [][16]byte // non-zero topic IDs
	messages []string   // non-null error messages
}

func nameOracle(msg any) oracleFinds {
	var f oracleFinds
	f.walk(reflect.ValueOf(msg))
	return f
}

func (f *oracleFinds) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			f.walk(v.Elem())
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := range v.Len() {
				f.walk(v.Index(i))
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f.field(v, v.Type().Field(i).Name, v.Field(i))
		}
	}
}

func (f *oracleFinds) field(parent reflect.Value, name string, v reflect.Value) {
	switch {
	case name == "TopicID":
		if id := v.Interface().([16]byte); id != ([16]byte{}) {
			f.ids = append(f.ids, id)
		}
	case name == "ErrorMessage":
		if m := v.Interface().(*string); m != nil {
			f.messages = append(f.messages, *m)
		}
	case name == "ResourceName":
		rt, ok := parent.FieldByName("ResourceType").Interface().(kmsg.ConfigResourceType)
		if ok && (rt == configResourceTopic || rt == configResourceGroup) && v.String() != "" {
			f.names = append(f.names, v.String())
		}
	case scopeNameFields[name]:
		f.strings(v)
	default:
		f.walk(v)
	}
}

func (f *oracleFinds) strings(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.String() != "" {
			f.names = append(f.names, v.String())
		}
	case reflect.Pointer:
		if !v.IsNil() {
			f.strings(v.Elem())
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			for i := range v.Len() {
				f.strings(v.Index(i))
			}
		} else {
			f.walk(v) // e.g. Groups []DescribeGroupsResponseGroup
		}
	}
}

// scopeFuzzOwner is the registry of the fuzz test: a topic ID's first byte
// decides its tenant; placeholders are no topic's, as in a real registry.
func scopeFuzzOwner(id [16]byte) (string, bool) {
	if string(id[:4]) == "~~~~" {
		return "", false
	}
	switch id[0] % 4 {
	case 1:
		return "acme~t", true
	case 2:
		return "bob~t", true
	case 3:
		return "t", true
	}
	return "", false
}

// scopedKeys are the table's APIs that carry a tenant's names.
func scopedKeys() []int16 {
	var keys []int16
	for k, e := range scopeTable {
		if e.request != nil || e.response != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// FuzzScope decodes arbitrary bytes as a request and a response of one API
// and runs the stage over them. It must not panic; an unscoped pass
// changes nothing; a scoped request reaches the handler with only the
// tenant's names and IDs (or placeholders); the scoped response holds only
// names whose internal form was the tenant's in the broker's answer, no ID
// of another tenant's topic the client did not send itself, and no error
// message with a separator.
func FuzzScope(f *testing.F) {
	for _, tc := range scopeCases() {
		var resp []byte
		if tc.resp != nil {
			resp = tc.resp.AppendTo(nil)
		}
		f.Add(tc.req.Key(), tc.req.GetVersion(), uint8(0), false, tc.req.AppendTo(nil), resp)
	}
	tenants := []string{"acme", "bob", "default"}
	f.Fuzz(func(t *testing.T, key, version int16, tenant uint8, unscoped bool, reqBytes, respBytes []byte) {
		req := kmsg.RequestForKey(key)
		if req == nil || version < 0 || version > req.MaxVersion() {
			return
		}
		req.SetVersion(version)
		if req.ReadFrom(reqBytes) != nil {
			return
		}
		s := Scope{Tenant: tenants[int(tenant)%len(tenants)], Unscoped: unscoped, TopicOwner: scopeFuzzOwner}
		before := string(req.AppendTo(nil))
		refused, err := s.Request(req)
		switch {
		case unscoped:
			if err != nil || string(req.AppendTo(nil)) != before {
				t.Fatalf("a super user's request changed (err %v)", err)
			}
		case err != nil:
			e, ok := scopeTable[key]
			if ok && version <= e.maxVersion {
				t.Fatalf("Request refused a covered request: %v", err)
			}
			return
		default:
			checkScopedRequest(t, s, req, refused)
		}
		resp := req.ResponseKind()
		resp.SetVersion(version)
		if resp.ReadFrom(respBytes) != nil {
			return
		}
		internal := nameOracle(resp)
		before = string(resp.AppendTo(nil))
		s.Response(resp, refused)
		if unscoped {
			if string(resp.AppendTo(nil)) != before {
				t.Fatal("a super user's response changed")
			}
			return
		}
		checkScopedResponse(t, s, internal, resp, refused)
	})
}

func checkScopedRequest(t *testing.T, s Scope, req kmsg.Request, refused Refused) {
	t.Helper()
	got := nameOracle(req)
	for _, n := range got.names {
		tenant, local := node.SplitName(n)
		if tenant != s.Tenant || node.QualifyName(tenant, local) != n {
			t.Fatalf("tenant %s: the handler would see %q", s.Tenant, n)
		}
	}
	for _, id := range got.ids {
		if _, ph := refused[id]; ph {
			continue
		}
		owner, ok := scopeFuzzOwner(id)
		if tenant, _ := node.SplitName(owner); !ok || tenant != s.Tenant {
			t.Fatalf("tenant %s: the handler would see topic ID %x of %q", s.Tenant, id, owner)
		}
	}
}

func checkScopedResponse(t *testing.T, s Scope, internal oracleFinds, resp kmsg.Response, refused Refused) {
	t.Helper()
	got := nameOracle(resp)
	for _, n := range got.names {
		if !slices.Contains(internal.names, node.QualifyName(s.Tenant, n)) {
			t.Fatalf("tenant %s: the client reads %q, which was not its own in %q", s.Tenant, n, internal.names)
		}
	}
	sent := make(map[[16]byte]bool, len(refused))
	for _, id := range refused {
		sent[id] = true
	}
	for _, id := range got.ids {
		owner, ok := scopeFuzzOwner(id)
		if tenant, _ := node.SplitName(owner); ok && tenant != s.Tenant && !sent[id] {
			t.Fatalf("tenant %s: the client reads topic ID %x of %q", s.Tenant, id, owner)
		}
	}
	for _, m := range got.messages {
		if strings.ContainsRune(m, node.TenantSeparator) {
			t.Fatalf("tenant %s: the client reads the message %q", s.Tenant, m)
		}
	}
}

// TestScopeRoundTrip: for any names a client sends, a response that echoes
// the internal names gives the client back exactly its own names, in
// order; the same response read by another tenant shows none of them.
func TestScopeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2))
	tenants := []string{"acme", "bob", "default"}
	for i := range 2000 {
		names := scopeRandomNames(rng)
		s := Scope{Tenant: tenants[i%len(tenants)], TopicOwner: scopeOwner}
		other := Scope{Tenant: tenants[(i+1)%len(tenants)], TopicOwner: scopeOwner}
		for _, e := range scopeRoundTrips {
			req := e.request(names)
			if _, err := s.Request(req); err != nil {
				t.Fatal(err)
			}
			echoed := e.echo(req)
			s.Response(echoed, nil)
			if got := e.names(echoed); !slices.Equal(got, names) {
				t.Fatalf("%s, tenant %s: sent %q, read back %q", e.name, s.Tenant, names, got)
			}
			foreign := e.echo(req)
			other.Response(foreign, nil)
			for _, n := range e.names(foreign) {
				if n != "" {
					t.Fatalf("%s: tenant %s reads %q of tenant %s (sent %q)", e.name, other.Tenant, n, s.Tenant, names)
				}
			}
		}
	}
}

// scopeRandomNames draws names that stress the rules: separators, other
// tenants' prefixes, the empty name, multibyte runes.
func scopeRandomNames(rng *rand.Rand) []string {
	parts := []string{"a", "orders", "~", "acme~", "bob~", "default~", "", "é", ".", "-", "_", "X"}
	out := make([]string, 1+rng.IntN(4))
	for i := range out {
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		out[i] = b.String()
	}
	return out
}

// scopeRoundTrip builds a request from names, the broker's echo of the request
// as rewritten, and reads the names back from a response.
type scopeRoundTrip struct {
	name    string
	request func(names []string) kmsg.Request
	echo    func(kmsg.Request) kmsg.Response
	names   func(kmsg.Response) []string
}

var scopeRoundTrips = []scopeRoundTrip{
	{
		name: "Produce",
		request: func(names []string) kmsg.Request {
			r := &kmsg.ProduceRequest{Version: 9}
			for _, n := range names {
				r.Topics = append(r.Topics, kmsg.ProduceRequestTopic{Topic: n})
			}
			return r
		},
		echo: func(req kmsg.Request) kmsg.Response {
			r := &kmsg.ProduceResponse{Version: 9}
			for _, t := range req.(*kmsg.ProduceRequest).Topics {
				r.Topics = append(r.Topics, kmsg.ProduceResponseTopic{Topic: t.Topic})
			}
			return r
		},
		names: func(resp kmsg.Response) (out []string) {
			for _, t := range resp.(*kmsg.ProduceResponse).Topics {
				out = append(out, t.Topic)
			}
			return out
		},
	},
	{
		name: "DescribeGroups",
		request: func(names []string) kmsg.Request {
			return &kmsg.DescribeGroupsRequest{Version: 5, Groups: slices.Clone(names)}
		},
		echo: func(req kmsg.Request) kmsg.Response {
			r := &kmsg.DescribeGroupsResponse{Version: 5}
			for _, g := range req.(*kmsg.DescribeGroupsRequest).Groups {
				r.Groups = append(r.Groups, kmsg.DescribeGroupsResponseGroup{Group: g, ErrorMessage: kmsg.StringPtr(fmt.Sprintf("group %q", g))})
			}
			return r
		},
		names: func(resp kmsg.Response) (out []string) {
			for _, g := range resp.(*kmsg.DescribeGroupsResponse).Groups {
				out = append(out, g.Group)
			}
			return out
		},
	},
	{
		name: "FindCoordinator v4",
		request: func(names []string) kmsg.Request {
			return &kmsg.FindCoordinatorRequest{Version: 4, CoordinatorKeys: slices.Clone(names)}
		},
		echo: func(req kmsg.Request) kmsg.Response {
			r := &kmsg.FindCoordinatorResponse{Version: 4}
			for _, k := range req.(*kmsg.FindCoordinatorRequest).CoordinatorKeys {
				r.Coordinators = append(r.Coordinators, kmsg.FindCoordinatorResponseCoordinator{Key: k})
			}
			return r
		},
		names: func(resp kmsg.Response) (out []string) {
			for _, c := range resp.(*kmsg.FindCoordinatorResponse).Coordinators {
				out = append(out, c.Key)
			}
			return out
		},
	},
	{
		name: "DescribeConfigs",
		request: func(names []string) kmsg.Request {
			r := &kmsg.DescribeConfigsRequest{Version: 4}
			for _, n := range names {
				r.Resources = append(r.Resources, kmsg.DescribeConfigsRequestResource{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: n})
			}
			return r
		},
		echo: func(req kmsg.Request) kmsg.Response {
			r := &kmsg.DescribeConfigsResponse{Version: 4}
			for _, c := range req.(*kmsg.DescribeConfigsRequest).Resources {
				r.Resources = append(r.Resources, kmsg.DescribeConfigsResponseResource{ResourceType: c.ResourceType, ResourceName: c.ResourceName})
			}
			return r
		},
		names: func(resp kmsg.Response) (out []string) {
			for _, c := range resp.(*kmsg.DescribeConfigsResponse).Resources {
				out = append(out, c.ResourceName)
			}
			return out
		},
	},
}

var updateScopeFields = flag.Bool("update-scope-fields", false, "rewrite testdata/scope_fields.txt")

// TestScopeKnowsEveryField lists every string and ID field of the requests
// and responses the stage rewrites, with how the oracle of FuzzScope reads
// each: a name, a topic ID, an error message, or "-" (no tenant's name). A
// kmsg upgrade that adds a field changes the list: decide whether it names
// something of a tenant, teach scope_apis.go and the oracle, and rerun with
// -update-scope-fields.
func TestScopeKnowsEveryField(t *testing.T) {
	var b strings.Builder
	for _, key := range scopedKeys() {
		req := kmsg.RequestForKey(key)
		scopeListFields(&b, reflect.TypeOf(req).Elem(), strings.TrimPrefix(fmt.Sprintf("%T", req), "*kmsg."), "")
		resp := req.ResponseKind()
		scopeListFields(&b, reflect.TypeOf(resp).Elem(), strings.TrimPrefix(fmt.Sprintf("%T", resp), "*kmsg."), "")
	}
	const golden = "testdata/scope_fields.txt"
	if *updateScopeFields {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("the string and ID fields of the scoped APIs changed; see the comment of this test.\ngot:\n%s", b.String())
	}
}

func scopeListFields(b *strings.Builder, typ reflect.Type, path, parentKind string) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "UnknownTags" {
			continue
		}
		p := path + "." + f.Name
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 {
			if ft.Kind() == reflect.Slice {
				p += "[]"
			}
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			scopeListFields(b, ft, p, "")
		case ft.Kind() == reflect.String || ft == reflect.TypeOf([16]byte{}):
			fmt.Fprintf(b, "%s %s\n", p, scopeFieldRole(typ, f.Name))
		}
	}
}

// scopeFieldRole says how the oracle reads a field.
func scopeFieldRole(parent reflect.Type, name string) string {
	switch {
	case name == "TopicID":
		return "id"
	case name == "ErrorMessage":
		return "message"
	case name == "ResourceName":
		if rt, ok := parent.FieldByName("ResourceType"); ok && rt.Type == reflect.TypeOf(kmsg.ConfigResourceType(0)) {
			return "name"
		}
		return "-"
	case scopeNameFields[name]:
		return "name"
	}
	return "-"
}
