package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestWireCodes pins every value to kmsg's constant of the same name, so a
// request field converts with a type conversion.
func TestWireCodes(t *testing.T) {
	pairs := []struct {
		name      string
		ours, kms int8
	}{
		{"ResourceAny", int8(ResourceAny), int8(kmsg.ACLResourceTypeAny)},
		{"ResourceTopic", int8(ResourceTopic), int8(kmsg.ACLResourceTypeTopic)},
		{"ResourceGroup", int8(ResourceGroup), int8(kmsg.ACLResourceTypeGroup)},
		{"ResourceCluster", int8(ResourceCluster), int8(kmsg.ACLResourceTypeCluster)},
		{"ResourceTransactionalID", int8(ResourceTransactionalID), int8(kmsg.ACLResourceTypeTransactionalId)},
		{"PatternAny", int8(PatternAny), int8(kmsg.ACLResourcePatternTypeAny)},
		{"PatternMatch", int8(PatternMatch), int8(kmsg.ACLResourcePatternTypeMatch)},
		{"PatternLiteral", int8(PatternLiteral), int8(kmsg.ACLResourcePatternTypeLiteral)},
		{"PatternPrefixed", int8(PatternPrefixed), int8(kmsg.ACLResourcePatternTypePrefixed)},
		{"OpAny", int8(OpAny), int8(kmsg.ACLOperationAny)},
		{"OpAll", int8(OpAll), int8(kmsg.ACLOperationAll)},
		{"OpRead", int8(OpRead), int8(kmsg.ACLOperationRead)},
		{"OpWrite", int8(OpWrite), int8(kmsg.ACLOperationWrite)},
		{"OpCreate", int8(OpCreate), int8(kmsg.ACLOperationCreate)},
		{"OpDelete", int8(OpDelete), int8(kmsg.ACLOperationDelete)},
		{"OpAlter", int8(OpAlter), int8(kmsg.ACLOperationAlter)},
		{"OpDescribe", int8(OpDescribe), int8(kmsg.ACLOperationDescribe)},
		{"OpClusterAction", int8(OpClusterAction), int8(kmsg.ACLOperationClusterAction)},
		{"OpDescribeConfigs", int8(OpDescribeConfigs), int8(kmsg.ACLOperationDescribeConfigs)},
		{"OpAlterConfigs", int8(OpAlterConfigs), int8(kmsg.ACLOperationAlterConfigs)},
		{"OpIdempotentWrite", int8(OpIdempotentWrite), int8(kmsg.ACLOperationIdempotentWrite)},
		{"PermissionAny", int8(PermissionAny), int8(kmsg.ACLPermissionTypeAny)},
		{"PermissionDeny", int8(PermissionDeny), int8(kmsg.ACLPermissionTypeDeny)},
		{"PermissionAllow", int8(PermissionAllow), int8(kmsg.ACLPermissionTypeAllow)},
	}
	for _, p := range pairs {
		if p.ours != p.kms {
			t.Errorf("%s = %d, kmsg has %d", p.name, p.ours, p.kms)
		}
	}
	// Kafka's names print the same as kmsg's.
	for v := ResourceAny; v <= ResourceTransactionalID; v++ {
		if got, want := v.String(), kmsg.ACLResourceType(v).String(); got != want {
			t.Errorf("ResourceType(%d) = %q, kmsg %q", v, got, want)
		}
	}
	for v := OpAny; v <= OpIdempotentWrite; v++ {
		if got, want := v.String(), kmsg.ACLOperation(v).String(); got != want {
			t.Errorf("Operation(%d) = %q, kmsg %q", v, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	for v := ResourceAny; v <= ResourceTransactionalID; v++ {
		if got, err := ParseResourceType(v.String()); err != nil || got != v {
			t.Errorf("ParseResourceType(%q) = %v, %v", v.String(), got, err)
		}
	}
	for v := PatternAny; v <= PatternPrefixed; v++ {
		if got, err := ParsePatternType(v.String()); err != nil || got != v {
			t.Errorf("ParsePatternType(%q) = %v, %v", v.String(), got, err)
		}
	}
	for v := OpAny; v <= OpIdempotentWrite; v++ {
		if got, err := ParseOperation(v.String()); err != nil || got != v {
			t.Errorf("ParseOperation(%q) = %v, %v", v.String(), got, err)
		}
	}
	for v := PermissionAny; v <= PermissionAllow; v++ {
		if got, err := ParsePermission(v.String()); err != nil || got != v {
			t.Errorf("ParsePermission(%q) = %v, %v", v.String(), got, err)
		}
	}
	// The spellings of kafka-acls and of people.
	spellings := []struct {
		in   string
		want any
	}{
		{"topic", ResourceTopic}, {"Group", ResourceGroup}, {"CLUSTER", ResourceCluster},
		{"transactional-id", ResourceTransactionalID}, {"transactional_id", ResourceTransactionalID},
		{"TransactionalId", ResourceTransactionalID},
		{"literal", PatternLiteral}, {"Prefixed", PatternPrefixed}, {"match", PatternMatch},
		{"read", OpRead}, {"Write", OpWrite}, {"all", OpAll}, {"describe-configs", OpDescribeConfigs},
		{"DescribeConfigs", OpDescribeConfigs}, {"alter_configs", OpAlterConfigs},
		{"idempotent-write", OpIdempotentWrite}, {"ClusterAction", OpClusterAction},
		{"allow", PermissionAllow}, {" Deny ", PermissionDeny},
	}
	for _, s := range spellings {
		var got any
		var err error
		switch s.want.(type) {
		case ResourceType:
			got, err = ParseResourceType(s.in)
		case PatternType:
			got, err = ParsePatternType(s.in)
		case Operation:
			got, err = ParseOperation(s.in)
		case Permission:
			got, err = ParsePermission(s.in)
		}
		if err != nil || got != s.want {
			t.Errorf("parse %q = %v, %v; want %v", s.in, got, err, s.want)
		}
	}
	for _, bad := range []string{"", "unknown", "topics", "user", "delegation-token", "read,write"} {
		if _, err := ParseResourceType(bad); err == nil {
			t.Errorf("ParseResourceType(%q) accepted", bad)
		}
		if _, err := ParseOperation(bad); err == nil {
			t.Errorf("ParseOperation(%q) accepted", bad)
		}
	}
	if got := Operation(13).String(); got != "OPERATION(13)" {
		t.Errorf("Operation(13).String() = %q", got)
	}
}

func TestSupports(t *testing.T) {
	cases := []struct {
		r    ResourceType
		op   Operation
		want bool
	}{
		{ResourceTopic, OpRead, true},
		{ResourceTopic, OpAll, true},
		{ResourceTopic, OpIdempotentWrite, false},
		{ResourceTopic, OpClusterAction, false},
		{ResourceGroup, OpRead, true},
		{ResourceGroup, OpWrite, false},
		{ResourceCluster, OpIdempotentWrite, true},
		{ResourceCluster, OpRead, false},
		{ResourceTransactionalID, OpWrite, true},
		{ResourceTransactionalID, OpRead, false},
		{ResourceAny, OpAll, false},
		{ResourceTopic, OpAny, false},
	}
	for _, c := range cases {
		if got := c.r.Supports(c.op); got != c.want {
			t.Errorf("%s.Supports(%s) = %v, want %v", c.r, c.op, got, c.want)
		}
	}
}
