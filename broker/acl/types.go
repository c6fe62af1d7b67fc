// This file owns the four enumerations of an ACL binding: resource type,
// pattern type, operation and permission. Their values are Kafka's wire codes,
// so a kmsg field converts with a plain type conversion in either direction
// (acl.Operation(req.Operation), kmsg.ACLOperation(op)).
//
// Invariant: every exported constant equals Kafka's code of the same name;
// the zero value of each type is Kafka's UNKNOWN and is never valid.
// Invariant: Parse(x.String()) == x for every named value.

package acl

import (
	"fmt"
	"strings"
)

// ResourceType is what a binding protects (Kafka's ResourceType, int8 on the wire).
type ResourceType int8

// Resource types, Kafka's codes. Kafka's DELEGATION_TOKEN (6) and USER (7)
// are not supported here.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
)

// PatternType says how a binding's resource name is compared with a resource's name.
type PatternType int8

// Pattern types, Kafka's codes.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: the binding's own pattern type is not looked at
	PatternMatch    PatternType = 2 // filters only: every binding that applies to the filter's literal name
	PatternLiteral  PatternType = 3 // the name is equal, or the binding's name is "*"
	PatternPrefixed PatternType = 4 // the binding's name is a prefix of the resource's name
)

// Operation is what a principal does to a resource.
type Operation int8

// Operations, Kafka's codes.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2 // in a binding: every operation
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
)

// Permission is whether a binding grants or refuses.
type Permission int8

// Permissions, Kafka's codes.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// ClusterName is the only resource name of the cluster resource type, as in Kafka.
const ClusterName = "kafka-cluster"

// Names as Kafka prints them (the enum names of its Java API).
var (
	resourceNames = [...]string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"}
	patternNames  = [...]string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}
	opNames       = [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER",
		"DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"}
	permissionNames = [...]string{"UNKNOWN", "ANY", "DENY", "ALLOW"}
)

func name(names []string, kind string, v int8) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

// parse finds s among names, ignoring case, '-' and '_', so "transactional-id",
// "TRANSACTIONAL_ID" and "transactionalId" all name the same value. The
// UNKNOWN name (index 0) is never accepted.
func parse(names []string, kind, s string) (int8, error) {
	key := squash(s)
	for i := 1; i < len(names); i++ {
		if squash(names[i]) == key {
			return int8(i), nil
		}
	}
	return 0, fmt.Errorf("acl: unknown %s %q", kind, s)
}

func squash(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.NewReplacer("-", "", "_", "").Replace(s)
}

func (r ResourceType) String() string { return name(resourceNames[:], "RESOURCE_TYPE", int8(r)) }
func (p PatternType) String() string  { return name(patternNames[:], "PATTERN_TYPE", int8(p)) }
func (o Operation) String() string    { return name(opNames[:], "OPERATION", int8(o)) }
func (p Permission) String() string   { return name(permissionNames[:], "PERMISSION", int8(p)) }

// ParseResourceType reads a resource type name: "topic", "group", "cluster",
// "transactional-id" (or "transactional_id"), "any"; case is ignored.
func ParseResourceType(s string) (ResourceType, error) {
	v, err := parse(resourceNames[:], "resource type", s)
	return ResourceType(v), err
}

// ParsePatternType reads "literal", "prefixed", "match" or "any"; case is ignored.
func ParsePatternType(s string) (PatternType, error) {
	v, err := parse(patternNames[:], "pattern type", s)
	return PatternType(v), err
}

// ParseOperation reads an operation name as kafka-acls spells it ("read",
// "write", "describe-configs", "IdempotentWrite", "all", "any"...); case,
// '-' and '_' are ignored.
func ParseOperation(s string) (Operation, error) {
	v, err := parse(opNames[:], "operation", s)
	return Operation(v), err
}

// ParsePermission reads "allow", "deny" or "any"; case is ignored.
func ParsePermission(s string) (Permission, error) {
	v, err := parse(permissionNames[:], "permission", s)
	return Permission(v), err
}

// supportedOps lists, per resource type, the operations a binding may name
// besides All: those some request checks on that type (Kafka's table, with
// the group config operations of KIP-848). A binding outside it would never
// be consulted, so it is refused rather than stored to mislead.
var supportedOps = [...][]Operation{
	ResourceTopic: {OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs},
	ResourceGroup: {OpRead, OpDelete, OpDescribe, OpDescribeConfigs, OpAlterConfigs},
	ResourceCluster: {OpCreate, OpAlter, OpDescribe, OpClusterAction, OpDescribeConfigs, OpAlterConfigs,
		OpIdempotentWrite},
	ResourceTransactionalID: {OpWrite, OpDescribe},
}

// Supports tells whether op can be checked on a resource of type r (All
// applies to every type). Unknown and filter-only values are not supported.
func (r ResourceType) Supports(op Operation) bool {
	if r < ResourceTopic || r > ResourceTransactionalID {
		return false
	}
	if op == OpAll {
		return true
	}
	for _, s := range supportedOps[r] {
		if s == op {
			return true
		}
	}
	return false
}
