package kafka

// The pure parts of the administrative APIs: error codes, the conversion
// of CreateAcls creations and DescribeAcls/DeleteAcls filters, the
// validation of SCRAM alterations, and whole-request refusals.

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/broker/kafka/authz"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/meta"
)

func TestAdminErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{authz.ErrSecurityDisabled, kerr.SecurityDisabled},
		{fmt.Errorf("x: %w", authz.ErrUnknownMechanism), kerr.UnsupportedSaslMechanism},
		{fmt.Errorf("x: %w", authz.ErrDuplicate), kerr.DuplicateResource},
		{authz.UnknownUserError("u"), kerr.ResourceNotFound},
		{fmt.Errorf("x: %w", acl.ErrInvalidBinding), kerr.InvalidRequest},
		{fmt.Errorf("x: %w", meta.ErrInvalidACL), kerr.InvalidRequest},
		{fmt.Errorf("x: %w", auth.ErrInvalidCredential), kerr.UnacceptableCredential},
		{fmt.Errorf("x: %w", meta.ErrInvalidCredential), kerr.UnacceptableCredential},
		{fmt.Errorf("x: %w", meta.ErrNotFound), kerr.ResourceNotFound},
		{fmt.Errorf("x: %w", meta.ErrConflict), kerr.RequestTimedOut},
		{errors.New("etcd is gone"), kerr.UnknownServerError},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			if got := authz.AdminErrorCode(tc.err); got != tc.want.Code {
				t.Fatalf("code %d (%v), want %s", got, kerr.ErrorForCode(got), tc.want.Message)
			}
		})
	}
	if code, msg := authz.AdminError(nil); code != 0 || msg != nil {
		t.Fatalf("nil error: %d %v", code, msg)
	}
}

func creation(rt, pt, op, perm int8, name, principal, host string) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourcePatternType = kmsg.ACLResourceType(rt), kmsg.ACLResourcePatternType(pt)
	c.Operation, c.PermissionType = kmsg.ACLOperation(op), kmsg.ACLPermissionType(perm)
	c.ResourceName, c.Principal, c.Host = name, principal, host
	return c
}

func TestBindingOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    kmsg.CreateACLsRequestCreation
		ok   bool
		host string
	}{
		{"topic read", creation(2, 3, 3, 3, "orders", "User:carl", "*"), true, "*"},
		{"mapped host unmapped", creation(2, 3, 3, 3, "orders", "User:carl", "::ffff:10.0.0.1"), true, "10.0.0.1"},
		{"prefixed group", creation(3, 4, 3, 2, "ops-", "User:*", "10.0.0.1"), true, "10.0.0.1"},
		{"cluster alter", creation(4, 3, 7, 3, acl.ClusterName, "User:carl", "*"), true, "*"},
		{"host name", creation(2, 3, 3, 3, "orders", "User:carl", "broker.example"), false, ""},
		{"no principal type", creation(2, 3, 3, 3, "orders", "carl", "*"), false, ""},
		{"any resource", creation(1, 3, 3, 3, "orders", "User:carl", "*"), false, ""},
		{"match pattern", creation(2, 2, 3, 3, "orders", "User:carl", "*"), false, ""},
		{"any operation", creation(2, 3, 1, 3, "orders", "User:carl", "*"), false, ""},
		{"any permission", creation(2, 3, 3, 1, "orders", "User:carl", "*"), false, ""},
		{"read on cluster", creation(4, 3, 3, 3, acl.ClusterName, "User:carl", "*"), false, ""},
		{"delegation token", creation(6, 3, 8, 3, "t", "User:carl", "*"), false, ""},
		{"empty name", creation(2, 3, 3, 3, "", "User:carl", "*"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := authz.BindingOf("team-a", &tc.c)
			if tc.ok != (err == nil) {
				t.Fatalf("ok = %v (%v), want %v", err == nil, err, tc.ok)
			}
			if err != nil {
				if authz.AdminErrorCode(err) != kerr.InvalidRequest.Code {
					t.Fatalf("refusal code %v, want INVALID_REQUEST", kerr.ErrorForCode(authz.AdminErrorCode(err)))
				}
				return
			}
			if b.Tenant != "team-a" || b.Host != tc.host {
				t.Fatalf("binding %s, want tenant team-a and host %q", b, tc.host)
			}
		})
	}
}

func TestFilterOf(t *testing.T) {
	str := kmsg.StringPtr
	bd := acl.Binding{Tenant: "team-a", ResourceType: acl.ResourceTopic, ResourceName: "orders",
		PatternType: acl.PatternLiteral, Principal: "User:carl", Host: "10.0.0.1",
		Operation: acl.OpRead, Permission: acl.PermissionAllow}
	for _, tc := range []struct {
		name    string
		w       authz.ACLFilter
		tenant  string
		valid   bool
		none    bool
		matches bool
	}{
		{"all", authz.ACLFilter{ResourceType: 1, Pattern: 1, Operation: 1, Permission: 1}, "team-a", true, false, true},
		{"other tenant", authz.ACLFilter{ResourceType: 1, Pattern: 1, Operation: 1, Permission: 1}, "team-b", true, false, false},
		{"match by name", authz.ACLFilter{ResourceType: 2, Name: str("orders"), Pattern: 2, Operation: 3, Permission: 3}, "team-a", true, false, true},
		{"mapped host", authz.ACLFilter{ResourceType: 1, Pattern: 1, Host: str("::ffff:10.0.0.1"), Operation: 1, Permission: 1}, "team-a", true, false, true},
		{"empty principal selects nothing", authz.ACLFilter{ResourceType: 1, Pattern: 1, Principal: str(""), Operation: 1, Permission: 1}, "team-a", true, true, false},
		{"unknown resource type", authz.ACLFilter{ResourceType: 0, Pattern: 1, Operation: 1, Permission: 1}, "team-a", false, false, false},
		{"unknown pattern", authz.ACLFilter{ResourceType: 1, Pattern: 0, Operation: 1, Permission: 1}, "team-a", false, false, false},
		{"operation out of range", authz.ACLFilter{ResourceType: 1, Pattern: 1, Operation: 13, Permission: 1}, "team-a", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, none, err := authz.FilterOf(tc.tenant, tc.w)
			if tc.valid != (err == nil) {
				t.Fatalf("valid = %v (%v), want %v", err == nil, err, tc.valid)
			}
			if err != nil {
				return
			}
			if none != tc.none {
				t.Fatalf("none = %v, want %v", none, tc.none)
			}
			if got := !none && f.Matches(bd); got != tc.matches {
				t.Fatalf("matches = %v, want %v", got, tc.matches)
			}
		})
	}
}

func upsertion(user string, mech int8, iterations int32, saltedLen int) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, mech, iterations
	u.Salt, u.SaltedPassword = []byte("salt"), make([]byte, saltedLen)
	return u
}

func TestScramChanges(t *testing.T) {
	r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	del := func(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = user, mech
		return d
	}
	r.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("ok", 1), del("dup", 2), del("badmech", 3)}
	r.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		upsertion("ok", 2, 4096, 64),
		upsertion("dup", 2, 4096, 64),
		upsertion("few", 1, 4095, 32),
		upsertion("many", 1, 16385, 32),
		upsertion("short", 2, 4096, 32), // a SHA-256-sized salted password for SHA-512
		upsertion("", 1, 4096, 32),
		upsertion("mixed", 1, 8192, 32),
		upsertion("mixed", 2, 1, 64),
	}
	changes, bad := authz.ScramChanges(r)
	want := map[string]*kerr.Error{
		"dup": kerr.DuplicateResource, "badmech": kerr.UnsupportedSaslMechanism,
		"few": kerr.UnacceptableCredential, "many": kerr.UnacceptableCredential,
		"short": kerr.UnacceptableCredential, "": kerr.UnacceptableCredential, "mixed": kerr.UnacceptableCredential,
	}
	for user, e := range want {
		if got := authz.AdminErrorCode(bad[user]); got != e.Code {
			t.Errorf("user %q: %v (%v), want %s", user, kerr.ErrorForCode(got), bad[user], e.Message)
		}
		if _, ok := changes[user]; ok {
			t.Errorf("user %q with an invalid alteration would still be altered", user)
		}
	}
	if len(bad) != len(want) {
		t.Errorf("refused %v", bad)
	}
	ok := changes["ok"]
	if len(ok) != 2 || ok[0].Keys != nil || ok[0].Mechanism != auth.MechanismScramSHA256 ||
		ok[1].Keys == nil || ok[1].Keys.Iterations != 4096 || len(ok[1].Keys.StoredKey) != 64 {
		t.Fatalf("changes of ok: %+v", ok)
	}
	if got := authz.AlteredUsers(r); len(got) != 8 || got[0] != "ok" || got[7] != "mixed" {
		t.Fatalf("altered users %q", got)
	}
}

// A request refused whole answers every item with the code.
func TestRefuseAdmin(t *testing.T) {
	code := kerr.ClusterAuthorizationFailed.Code
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.Creations = make([]kmsg.CreateACLsRequestCreation, 3)
	dr := kmsg.NewPtrDeleteACLsRequest()
	dr.Filters = make([]kmsg.DeleteACLsRequestFilter, 2)
	ar := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	ar.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion("a", 1, 4096, 32), upsertion("b", 1, 4096, 32), upsertion("a", 2, 4096, 64)}
	for _, tc := range []struct {
		body  kmsg.Request
		check func(kmsg.Response) bool
	}{
		{cr, func(r kmsg.Response) bool {
			rs := r.(*kmsg.CreateACLsResponse).Results
			return len(rs) == 3 && rs[0].ErrorCode == code && rs[2].ErrorCode == code && rs[2].ErrorMessage != nil
		}},
		{kmsg.NewPtrDescribeACLsRequest(), func(r kmsg.Response) bool { return r.(*kmsg.DescribeACLsResponse).ErrorCode == code }},
		{dr, func(r kmsg.Response) bool {
			rs := r.(*kmsg.DeleteACLsResponse).Results
			return len(rs) == 2 && rs[1].ErrorCode == code
		}},
		{kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), func(r kmsg.Response) bool {
			return r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode == code
		}},
		{ar, func(r kmsg.Response) bool {
			rs := r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results
			return len(rs) == 2 && rs[0].User == "a" && rs[1].User == "b" && rs[1].ErrorCode == code
		}},
	} {
		t.Run(kmsg.NameForKey(tc.body.Key()), func(t *testing.T) {
			tc.body.SetVersion(tc.body.MaxVersion())
			if resp := authz.RefuseAdmin(tc.body, code, "no"); !tc.check(resp) {
				t.Fatalf("refusal %+v", resp)
			}
		})
	}
}

// FuzzACLConversion feeds arbitrary creation and filter fields, and
// arbitrary CreateAcls and DeleteAcls request bodies, through the
// conversions: nothing panics, every refusal is INVALID_REQUEST, and every
// binding accepted is one Validate accepts and survives the store's form.
func FuzzACLConversion(f *testing.F) {
	f.Add(int8(2), int8(3), int8(3), int8(3), "orders", "User:carl", "*", []byte{}, int16(3))
	f.Add(int8(4), int8(3), int8(7), int8(3), acl.ClusterName, "User:*", "::ffff:1.2.3.4", []byte{0, 0, 0, 1}, int16(1))
	f.Add(int8(1), int8(2), int8(1), int8(1), "", "", "", []byte{2, 2, 7, 'o', 'r', 'd', 'e', 'r', 's'}, int16(2))
	f.Add(int8(-1), int8(9), int8(13), int8(0), "*", "User:", "fe80::1%eth0", []byte{0xff, 0xff, 0xff, 0xff}, int16(0))
	f.Fuzz(func(t *testing.T, rt, pt, op, perm int8, name, principal, host string, body []byte, version int16) {
		check := func(c *kmsg.CreateACLsRequestCreation) {
			b, err := authz.BindingOf("team-a", c)
			if err != nil {
				if authz.AdminErrorCode(err) != kerr.InvalidRequest.Code {
					t.Fatalf("creation %+v refused with %v", c, err)
				}
				return
			}
			if err := b.Validate(); err != nil {
				t.Fatalf("accepted binding does not validate: %v", err)
			}
			if back := authz.BindingOfMeta(authz.MetaOfBinding(b)); back != b {
				t.Fatalf("store form changes the binding: %s -> %s", b, back)
			}
		}
		filter := func(w authz.ACLFilter) {
			fl, _, err := authz.FilterOf("team-a", w)
			if err != nil {
				if authz.AdminErrorCode(err) != kerr.InvalidRequest.Code {
					t.Fatalf("filter %+v refused with %v", w, err)
				}
				return
			}
			if fl.Tenant != "team-a" || fl.AnyTenant {
				t.Fatalf("filter escapes the tenant: %+v", fl)
			}
			if fl.Matches(acl.Binding{Tenant: "team-b", ResourceType: acl.ResourceTopic, ResourceName: name,
				PatternType: acl.PatternLiteral, Principal: principal, Host: host}) {
				t.Fatalf("filter %+v of tenant team-a matches a binding of team-b", fl)
			}
		}
		c := creation(rt, pt, op, perm, name, principal, host)
		check(&c)
		filter(authz.ACLFilter{ResourceType: kmsg.ACLResourceType(rt), Name: &name, Pattern: kmsg.ACLResourcePatternType(pt),
			Principal: &principal, Host: &host, Operation: kmsg.ACLOperation(op), Permission: kmsg.ACLPermissionType(perm)})
		filter(authz.ACLFilter{ResourceType: kmsg.ACLResourceType(rt), Pattern: kmsg.ACLResourcePatternType(pt),
			Operation: kmsg.ACLOperation(op), Permission: kmsg.ACLPermissionType(perm)})

		v := 1 + int16(uint16(version)%3) // the served versions, 1-3
		cr := kmsg.NewPtrCreateACLsRequest()
		cr.Version = v
		if cr.ReadFrom(body) == nil {
			for i := range cr.Creations {
				check(&cr.Creations[i])
			}
		}
		dr := kmsg.NewPtrDeleteACLsRequest()
		dr.Version = v
		if dr.ReadFrom(body) == nil {
			for _, w := range dr.Filters {
				filter(authz.ACLFilter{ResourceType: w.ResourceType, Name: w.ResourceName, Pattern: w.ResourcePatternType,
					Principal: w.Principal, Host: w.Host, Operation: w.Operation, Permission: w.PermissionType})
			}
		}
	})
}
