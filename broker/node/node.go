package node

// This file owns the Node: this broker's own state below every protocol
// front end — its configuration, data directory, journal, the registry of
// topics and the partitions it hosts, tiering, the disk guard and metrics.
// The Kafka and HTTP front ends, the cluster membership and the group
// coordinator sit on top of it (broker/kafka, broker/httpapi,
// broker/cluster, broker/coordinator); the broker package composes them.
//
// Invariant: the Node imports none of the packages above it. What it needs
// from them (placement of new partitions, the controller's identity, the
// coordinator forgetting a deleted topic's offsets) it reaches through
// Hooks, set once before Run starts anything.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/broker/fair"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/listener"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/cache"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// PartitionKey names one partition of one topic.
type PartitionKey = replica.PartitionKey

// ReplicaFetchMaxBytes bounds one replica fetch response: followers ask
// for it, and the Kafka front end keeps reply buffers that size.
const ReplicaFetchMaxBytes = 16 << 20

// Hooks are the calls the Node makes into the packages above it.
type Hooks struct {
	// Place assigns replicas to n new partitions of the topic named topic
	// (its internal name: the tenant's pool and leaders count) with
	// replication factor rf (-1: the default); PlaceMore to count more
	// partitions of t.
	Place     func(ctx context.Context, topic string, n, rf int) ([][]int32, error)
	PlaceMore func(ctx context.Context, t *Topic, count int) ([][]int32, error)
	// AwaitLeaders waits up to d for every partition of the topic to have
	// a leader.
	AwaitLeaders func(ctx context.Context, id [16]byte, d time.Duration)
	// ControllerID is the node id of the controller, -1 when unknown.
	ControllerID func() int32
	// ForgetTopic drops the committed offsets of a deleted topic.
	ForgetTopic func(ctx context.Context, name string, id [16]byte)
	// Net is how the replica of partition key reaches the cluster.
	Net func(key PartitionKey) partition.Net
}

// Node is one broker's local state.
type Node struct {
	Cfg    Config
	Logger zerolog.Logger
	FS     vfs.FS
	M      *Metrics
	Hooks  Hooks

	// NodeLog is Logger without its component=broker: every other
	// component's logger derives from it, as zerolog writes a key given
	// twice twice.
	NodeLog zerolog.Logger

	// InterBrokerTLS is the TLS of the links between brokers under
	// --inter-broker-security-protocol SSL, nil under PLAINTEXT; set by
	// OpenInterBrokerTLS before Run starts anything (interbroker_tls.go).
	InterBrokerTLS *listener.TLSSource

	Store     *meta.Store
	ClusterID string
	Journal   *wal.Journal // the durable point every partition shares; nil with PerPartitionFsync

	// Incarnation of the data directory (datadir.go), set by Run before
	// any partition opens; read-only after.
	Incarnation replica.Incarnation

	Objects    objstore.Store         // tiering (tiering.go); set in Run before partitions open
	probe      storeProbe             // the object store's readiness (tiering_probe.go)
	diskFull   atomic.Pointer[string] // why produce is refused (diskguard.go); "" or nil: accepted
	limitState                        // quotas, the disk ladder and storage figures (limits.go)
	restarting sync.Map               // PartitionKey → true while restartBehindLeader reopens it
	Rcache     *cache.Cache
	// Fair is the tenants' lanes of handler time, tail reads and backfill
	// GETs (fair.go); built by New, never nil.
	Fair  *fair.Set
	Tiers *tier.Manager
	// Tenants are the per-tenant metrics (broker/quota), registered on
	// M.Reg by New; the refusals decided here are counted in them.
	Tenants *quota.Metrics

	// AdminMu serialises topic changes (create, delete, configs, partitions)
	// so that each reads and replaces the registry entry it changes alone.
	AdminMu sync.Mutex
	// PendingStates holds partition states the watch delivered for topics
	// (or partitions) not yet registered here, until they are; guarded by
	// AdminMu (cluster.go, mergePendingStates).
	PendingStates map[PartitionKey]meta.PartitionState

	mu     sync.RWMutex
	topics map[string]*Topic   // guarded by mu
	byID   map[[16]byte]*Topic // guarded by mu

	pidMu           sync.Mutex
	pidNext, pidEnd int64 // guarded by pidMu: the unused rest of the reserved block

	// PartCtx is the parent context of every partition owner.
	PartCtx context.Context
	PartWG  sync.WaitGroup
}

// New returns the state of a broker with configuration cfg (already
// validated) logging through nodeLog.
func New(cfg Config, nodeLog zerolog.Logger) *Node {
	fs := cfg.FS
	if fs == nil {
		fs = vfs.OS
	}
	m := NewMetrics()
	tenants := quota.NewMetrics(m.Reg)
	return &Node{
		Cfg:           cfg,
		Logger:        nodeLog.With().Str("component", "broker").Logger(),
		NodeLog:       nodeLog,
		FS:            fs,
		M:             m,
		Fair:          newFair(cfg, m.Reg, tenants.Label),
		Tenants:       tenants,
		topics:        make(map[string]*Topic),
		byID:          make(map[[16]byte]*Topic),
		PendingStates: make(map[PartitionKey]meta.PartitionState),
	}
}

// SleepCtx waits d or until ctx ends.
func SleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
