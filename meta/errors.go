package meta

import "errors"

// Sentinel errors. Callers classify with errors.Is; every error returned by
// this package wraps one of these or an etcd or context error.
var (
	// ErrTopicExists: a topic of that name already exists.
	ErrTopicExists = errors.New("meta: topic already exists")
	// ErrTopicNotFound: no topic of that name exists.
	ErrTopicNotFound = errors.New("meta: topic not found")
	// ErrConflict: a compare-and-swap lost; the value changed since it was read.
	ErrConflict = errors.New("meta: concurrent update conflict")
	// ErrInvalidPartitions: partition count not positive, or an update would decrease it.
	ErrInvalidPartitions = errors.New("meta: invalid partition count")
	// ErrInvalidReplicationFactor: replication factor not positive.
	ErrInvalidReplicationFactor = errors.New("meta: invalid replication factor")
	// ErrInvalidTopic: a topic name that Kafka would not accept.
	ErrInvalidTopic = errors.New("meta: invalid topic name")
	// ErrInvalidConfig: a Config that cannot be used.
	ErrInvalidConfig = errors.New("meta: invalid config")
	// ErrCorrupt: a stored value that cannot be decoded or breaks an invariant.
	ErrCorrupt = errors.New("meta: corrupt value")
	// ErrUnknownVersion: a stored value or layout written by a newer version.
	ErrUnknownVersion = errors.New("meta: unknown format version")
	// ErrClosed: the Store has been closed.
	ErrClosed = errors.New("meta: store closed")
)

// Sentinel errors of partition states and fenced writes.
var (
	// ErrPartitionNotFound: no state is stored for that partition.
	ErrPartitionNotFound = errors.New("meta: partition state not found")
	// ErrInvalidPartitionState: a partition state that breaks a rule (replicas
	// empty or repeated, leader not a replica, negative or lowered epoch).
	ErrInvalidPartitionState = errors.New("meta: invalid partition state")
	// ErrNotController: a controller write's extra condition (its IfLeader
	// fence) failed: the writer is no longer the controller.
	ErrNotController = errors.New("meta: not the controller")
	// ErrFenced: a write's extra condition (the writer's fence, such as a
	// group coordinator's election key) failed; the failing transaction
	// wrote nothing (see CommitOffsetsIf for commits of several).
	ErrFenced = errors.New("meta: fenced")
)

// Sentinel errors of tenants, users, credentials, API keys and ACLs
// (security.go, security_acl.go).
var (
	// ErrExists: a tenant, user or API key of that name or id already exists.
	ErrExists = errors.New("meta: already exists")
	// ErrNotFound: no tenant, user, credential or API key of that name or id.
	ErrNotFound = errors.New("meta: not found")
	// ErrNotEmpty: a tenant still has users and cannot be deleted.
	ErrNotEmpty = errors.New("meta: not empty")
	// ErrReserved: a tenant that exists implicitly (SystemTenant,
	// DefaultTenant) cannot be created or deleted by hand.
	ErrReserved = errors.New("meta: reserved name")
	// ErrInvalidName: a tenant, user or API key id, SCRAM mechanism or role
	// this package does not accept.
	ErrInvalidName = errors.New("meta: invalid name")
	// ErrInvalidCredential: SCRAM keys or an API key hash of the wrong shape.
	ErrInvalidCredential = errors.New("meta: invalid credential")
	// ErrInvalidACL: an ACL binding with an empty or invalid field.
	ErrInvalidACL = errors.New("meta: invalid ACL binding")
	// ErrLimit: a user already has MaxAPIKeysPerUser API keys.
	ErrLimit = errors.New("meta: limit reached")
)

// Sentinel errors of the upload byte counters (upload_bytes.go).
var (
	// ErrUncounted: the counters are not complete yet (no recount has run
	// since they were introduced); sum the upload records instead.
	ErrUncounted = errors.New("meta: upload byte counters not counted yet")
)
