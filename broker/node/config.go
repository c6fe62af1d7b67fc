package node

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// MinQueuedRequestBytes is the smallest request memory a broker accepts:
// one frame chunk.
const MinQueuedRequestBytes = 64 << 10

// Config is everything a broker needs to run. cmd/sluiced fills it from flags
// and an optional YAML file; tests fill it directly.
type Config struct {
	NodeID         int32
	AZ             string
	DataDir        string
	KafkaListen    string // host:port the Kafka listener binds
	KafkaAdvertise string // host:port given to clients; defaults to KafkaListen
	HTTPListen     string
	// InterBrokerListen is the host:port of the inter-broker listener
	// (interbroker.go): replica fetches and election messages are served
	// there and nowhere else. It is registered in etcd for the other
	// brokers and never given to clients.
	InterBrokerListen string
	// Pool is the broker pool (--pool, meta.DefaultPool when empty): a
	// tenant bound to a pool has its new partitions placed on that pool's
	// brokers only.
	Pool string
	// InterBrokerAdvertise is the host:port the other brokers dial for it;
	// defaults to InterBrokerListen (the bound address when that is the
	// same, so port 0 works).
	InterBrokerAdvertise string
	ObjectStore          string // object store URL (tiering); "" means file://<data dir>/objects
	// ObjectStoreOptions tune the store's calls (timeout, attempts) and may
	// carry S3 credentials; without them the standard AWS chain is used.
	ObjectStoreOptions objstore.Options
	// ReadCacheBytes bounds the read cache of remote object ranges.
	ReadCacheBytes int64
	// FairHandlerSlots and FairTailSlots override the slots of the
	// fair-scheduling lanes (fair.go; 0: 2 × GOMAXPROCS). Tests set 1 to
	// make a lane's queue observable.
	FairHandlerSlots, FairTailSlots int
	// PageCacheTailBytes is how much of each partition's newest durable log
	// the broker leaves in the kernel's page cache; older bytes are dropped
	// from it once fsynced (wal.Config.CacheTailBytes). 0 or less leaves
	// the page cache to the kernel.
	PageCacheTailBytes int64
	// TierGrace is how long an object stays after the log start passed it,
	// for readers still streaming it.
	TierGrace time.Duration
	// LocalMaxBytes and DiskMinFreeBytes are the local disk watermarks:
	// produce is refused (retriable) while the local logs hold at least
	// LocalMaxBytes, or the data dir's file system has less than
	// DiskMinFreeBytes free; 0 turns either off.
	LocalMaxBytes    int64
	DiskMinFreeBytes int64
	// DiskWatermarks are the disk ladder's three steps (diskladder.go), in
	// percent of the data dir's file system in use; zero: off. The reserve
	// below them is DiskMinFreeBytes.
	DiskWatermarks Watermarks
	// DiskUsage reads the data dir's file system (total and free bytes);
	// nil is statfs. Tests inject readings to drive the ladder.
	DiskUsage func(dir string) (total, free int64, err error)
	// Quotas answers each tenant's limits (limits.go, storage.go); nil:
	// unlimited.
	Quotas quota.Source
	// Refs claims the object references of produced envelope records
	// (refs.go); nil: no object store, and every envelope is refused.
	Refs RefClaimer
	// PeerInterBroker, when it names a node, is the address this broker
	// dials for that node's inter-broker listener (replica fetches and
	// election messages) instead of the one it registered: a route of its
	// own per link, as the chaos suite's per-link proxies need.
	PeerInterBroker map[int32]string
	// Objects, when set, is the object store itself instead of opening
	// ObjectStore; tests pass a fault-injecting one, as FS for the disk.
	Objects objstore.Store
	// ScrubInterval is how often the controller removes orphaned objects
	// (named by no head, manifest or intent, seen so for TierGrace); 0: never.
	ScrubInterval time.Duration
	// TierChunkBytes is the chunk size of uploaded objects (0: 4 MiB).
	TierChunkBytes int
	// Now is the clock of tiering and retention decisions; nil is the wall
	// clock. Tests inject one to drive retention through days.
	Now func() time.Time

	AutoCreateTopics  bool
	DefaultPartitions int32
	// DefaultReplicationFactor is the replication factor of a topic created
	// without one (auto-created, or CreateTopics asking for the default);
	// 0 is one replica per AZ of the live brokers, at most 3.
	DefaultReplicationFactor int
	// DefaultRetentionMs is retention.ms of a topic that sets none
	// (Kafka's log.retention.ms); 24 h by default.
	DefaultRetentionMs int64
	// DefaultMinInsyncReplicas is min.insync.replicas of a topic that sets
	// none (Kafka's broker-level min.insync.replicas). A write is committed
	// on at least a majority of a partition's replicas whatever it says.
	DefaultMinInsyncReplicas int

	// RetentionCheckInterval is how often each partition rolls aged
	// segments and applies retention.
	RetentionCheckInterval time.Duration
	// MaxRequestBytes bounds one request frame (Kafka's socket.request.max.bytes).
	MaxRequestBytes int32
	// QueuedMaxRequestBytes bounds the request bytes the broker holds at
	// once, over all connections, from the first byte read until the reply
	// is written (Kafka's queued.max.request.bytes). When it is spent the
	// broker stops reading requests (broker/kafka/frames). A frame larger than it is
	// refused.
	QueuedMaxRequestBytes int64
	// FetchMaxBytes caps the MaxBytes of a Kafka fetch and the max_bytes of
	// an HTTP fetch (Kafka's fetch.max.bytes). The first batch is still
	// returned whole when it alone is larger.
	FetchMaxBytes int32
	// RemoteFetchMaxBytes caps what one partition of a Kafka fetch reads
	// from object storage (the first batch whole): a consumer replaying a
	// tiered log is answered in slices of at most this much, so the CPU of
	// each answer (copying, encoding, writing it) is a short stretch that
	// other tenants' requests wait behind, not the client's
	// max.partition.fetch.bytes.
	RemoteFetchMaxBytes int32
	// MaxConnections bounds open Kafka connections (Kafka's max.connections);
	// connections over it are closed at accept.
	MaxConnections int
	// MaxConnectionsPerIP bounds open Kafka connections from one client IP
	// (Kafka's max.connections.per.ip); 0 means no per-IP bound.
	MaxConnectionsPerIP int
	// ConnectionsMaxIdle closes a Kafka connection that has no request in
	// flight and has sent no request bytes for this long (Kafka's
	// connections.max.idle.ms).
	ConnectionsMaxIdle time.Duration
	// MinReceiveRate is the bytes per second a Kafka connection must
	// deliver while a request frame is partly received, measured over
	// MinReceiveWindow; a slower one is closed and its request memory
	// returned (a slow-loris defence). 0 turns it off.
	MinReceiveRate int64
	// MinReceiveWindow is the window MinReceiveRate is measured over.
	MinReceiveWindow time.Duration
	// ProducerIDExpiration is how long an idle idempotent producer's state
	// is kept (Kafka's producer.id.expiration.ms).
	ProducerIDExpiration time.Duration
	// PartitionQueue bounds the produce batches waiting for one partition owner.
	PartitionQueue int

	// PerPartitionFsync makes each partition fsync its own segments for
	// every group commit, as Sluice did before the broker journal; by
	// default all partitions share the journal's group commits
	// (docs/durability.md). Kept for comparisons and as a fallback.
	PerPartitionFsync bool
	// Journal tunes the broker journal (file size, checkpoint interval).
	Journal wal.JournalConfig

	// RegistrationTTL is the lease of the broker's registration: a broker
	// that stops renewing it (crashed, paused, cut off from etcd) leaves the
	// cluster's view this long after.
	RegistrationTTL time.Duration
	// Canary runs the synthetic probe of broker/canary in this broker's AZ
	// (sluiced --canary); CanaryInterval is the time between its rounds
	// (0: 1s) and CanaryTimeout bounds one publish (0: 5s): a failover
	// longer than it shows as failed publishes.
	Canary                        bool
	CanaryInterval, CanaryTimeout time.Duration
	// ControllerTTL is the lease of the controller's election key: how long
	// after the controller's loss another broker takes over.
	ControllerTTL time.Duration

	Meta        meta.Config
	Coordinator CoordinatorConfig
	// ListenerConfig is the Kafka listeners and their TLS and SASL
	// settings (config_listeners.go).
	ListenerConfig

	// FS is the file system every broker-owned file goes through (logs,
	// producer snapshots, the data-dir identity, deletions). Nil means the
	// operating system's; tests pass a vfs.Mem or a vfs.Faulty.
	FS vfs.FS

	// ---- Security of the HTTP API and the authoriser (broker/security,
	// broker/httpapi's pipeline). Kept in one block for merging.

	// SecurityEnabled makes every HTTP request authenticate (Bearer API
	// key, Basic, or a verified client certificate) and authorises every
	// operation by the ACLs (--security). Off, the development default of
	// `make run`, requests are anonymous and allowed.
	SecurityEnabled bool
	// SuperUsers are principals ("User:alice") allowed everything in every
	// tenant (--super-users).
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows an operation on a resource that no
	// ACL binding applies to (--allow-everyone-if-no-acl-found). True in
	// DefaultConfig; cmd/sluiced turns it off when --security is on and the
	// flag is not given.
	AllowEveryoneIfNoACLFound bool
	// AdminPasswordFile, when set, creates the tenants "system" and
	// "default" and the super user "admin" (in "system") with this file's
	// password if no user "admin" exists (--admin-password-file).
	AdminPasswordFile string
	// InterBrokerSecurityProtocol is what the inter-broker listener and
	// every dial to another broker's speak (--inter-broker-security-protocol):
	// PLAINTEXT (the default; "" is the same) or SSL, mutual TLS with
	// TLSCertFile, TLSKeyFile and TLSClientCAFile (interbroker_tls.go).
	InterBrokerSecurityProtocol string
	// InterBrokerPrincipals are the certificate principals ("User:broker-1")
	// the inter-broker listener serves under SSL
	// (--inter-broker-principals); empty: SuperUsers.
	InterBrokerPrincipals []string
	// The HTTP listener serves HTTPS with ListenerConfig's TLSCertFile and
	// TLSKeyFile when they are set, and accepts client certificates that
	// chain to its TLSClientCAFile (optional there: Bearer and Basic work
	// too).

	// UploadSessionTTL is how long a large-payload upload session may stay
	// open, and a completed one unpublished, before the sweeper deletes
	// its bytes (--upload-session-ttl; 0: 1 h; broker/largeobj).
	UploadSessionTTL time.Duration
	// MaxObjectBytes is the largest large payload a session accepts
	// (--max-object-bytes; 0: 100 MiB).
	MaxObjectBytes int64
	// UploadSweepInterval is how often the broker sweeps upload sessions
	// past their TTL (0: one minute).
	UploadSweepInterval time.Duration
}

// DefaultConfig returns the settings of a lone broker started with no flags.
func DefaultConfig() Config {
	return Config{
		NodeID:                   1,
		AZ:                       "az1",
		DataDir:                  "data",
		KafkaListen:              "127.0.0.1:9092",
		HTTPListen:               "127.0.0.1:8080",
		InterBrokerListen:        "127.0.0.1:9093",
		AutoCreateTopics:         true,
		DefaultPartitions:        1,
		DefaultRetentionMs:       24 * time.Hour.Milliseconds(),
		DefaultMinInsyncReplicas: 1,
		RetentionCheckInterval:   30 * time.Second,
		ReadCacheBytes:           256 << 20,
		PageCacheTailBytes:       64 << 20,
		TierGrace:                10 * time.Minute,
		DiskMinFreeBytes:         64 << 20,
		ScrubInterval:            time.Hour,
		MaxRequestBytes:          100 << 20,
		QueuedMaxRequestBytes:    100 << 20,
		FetchMaxBytes:            55 << 20,
		RemoteFetchMaxBytes:      1 << 20,
		MaxConnections:           10000,
		MaxConnectionsPerIP:      0,
		ConnectionsMaxIdle:       10 * time.Minute,
		MinReceiveRate:           1 << 10,
		MinReceiveWindow:         10 * time.Second,
		PartitionQueue:           256,
		ProducerIDExpiration:     24 * time.Hour,
		Meta: meta.Config{
			ListenClient: "127.0.0.1:2379",
			ListenPeer:   "127.0.0.1:2380",
		},
		Coordinator: DefaultCoordinatorConfig(),
		ListenerConfig: ListenerConfig{
			SASLEnabledMechanisms: DefaultSASLMechanisms,
			SASLSessionLifetime:   DefaultSASLSessionLifetime,
		},
		RegistrationTTL: meta.DefaultRegistrationTTL,
		ControllerTTL:   meta.DefaultControllerTTL,

		// Security: off, and every resource without ACLs open (dev default).
		AllowEveryoneIfNoACLFound:   true,
		InterBrokerSecurityProtocol: InterBrokerPlaintext,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	if c.NodeID < 0 {
		return fmt.Errorf("broker: node id %d must not be negative", c.NodeID)
	}
	if c.DataDir == "" {
		return errors.New("broker: data dir is required")
	}
	if c.UploadSessionTTL < 0 || c.MaxObjectBytes < 0 || c.UploadSweepInterval < 0 {
		return errors.New("broker: upload session TTL, max object bytes and upload sweep interval must not be negative")
	}
	if maxParts := int64(10_000); c.MaxObjectBytes > maxParts*(8<<20) {
		// broker/largeobj's parts are 8 MiB; S3 takes at most 10,000.
		return fmt.Errorf("broker: max object bytes %d needs more than %d parts of 8 MiB", c.MaxObjectBytes, maxParts)
	}
	if c.Pool != "" {
		if err := meta.ValidatePoolName(c.Pool); err != nil {
			return fmt.Errorf("broker: --pool: %w", err)
		}
	}
	listens := map[string]string{"http-listen": c.HTTPListen}
	if c.InterBrokerListener == "" { // a named one is among the listeners
		listens["inter-broker-listen"] = c.InterBrokerListen
	}
	for name, addr := range listens {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("broker: --%s %q: %w", name, addr, err)
		}
	}
	kafkaListens, err := c.validateListeners()
	if err != nil {
		return err
	}
	maps.Copy(listens, kafkaListens)
	if err := distinctListeners(listens); err != nil {
		return err
	}
	for name, addr := range map[string]string{"kafka-advertise": c.KafkaAdvertise, "inter-broker-advertise": c.InterBrokerAdvertise} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("broker: --%s %q: %w", name, addr, err)
		}
	}
	if c.DefaultPartitions < 1 {
		return fmt.Errorf("broker: default partitions %d must be at least 1", c.DefaultPartitions)
	}
	if err := c.validateTopicDefaults(); err != nil {
		return err
	}
	if c.RetentionCheckInterval <= 0 {
		return fmt.Errorf("broker: retention check interval %v must be positive", c.RetentionCheckInterval)
	}
	if c.MaxRequestBytes < 1024 {
		return fmt.Errorf("broker: max request bytes %d is too small", c.MaxRequestBytes)
	}
	if c.QueuedMaxRequestBytes < MinQueuedRequestBytes {
		return fmt.Errorf("broker: queued max request bytes %d is below %d", c.QueuedMaxRequestBytes, MinQueuedRequestBytes)
	}
	if c.FetchMaxBytes < 1024 {
		return fmt.Errorf("broker: fetch max bytes %d is below 1024", c.FetchMaxBytes)
	}
	if c.RemoteFetchMaxBytes < 1024 {
		return fmt.Errorf("broker: remote fetch max bytes %d is below 1024", c.RemoteFetchMaxBytes)
	}
	if c.MaxConnections < 1 {
		return fmt.Errorf("broker: max connections %d must be at least 1", c.MaxConnections)
	}
	if c.MaxConnectionsPerIP < 0 {
		return fmt.Errorf("broker: max connections per ip %d must not be negative (0: no per-IP bound)", c.MaxConnectionsPerIP)
	}
	if c.ConnectionsMaxIdle < time.Millisecond {
		return fmt.Errorf("broker: connections max idle %v must be at least 1ms", c.ConnectionsMaxIdle)
	}
	if c.MinReceiveRate < 0 || (c.MinReceiveRate > 0 && c.MinReceiveWindow < time.Millisecond) {
		return fmt.Errorf("broker: min receive rate %d must not be negative (0: off), and its window %v must be at least 1ms",
			c.MinReceiveRate, c.MinReceiveWindow)
	}
	if c.ProducerIDExpiration <= 0 {
		return fmt.Errorf("broker: producer id expiration %v must be positive", c.ProducerIDExpiration)
	}
	if err := c.Coordinator.Validate(); err != nil {
		return err
	}
	if err := c.DiskWatermarks.Validate(); err != nil {
		return fmt.Errorf("broker: --disk-watermarks: %w", err)
	}
	if c.PartitionQueue < 1 {
		return fmt.Errorf("broker: partition queue %d must be at least 1", c.PartitionQueue)
	}
	return c.validateSecurity()
}

// validateSecurity checks the security block.
func (c Config) validateSecurity() error {
	if err := (acl.Config{SuperUsers: c.SuperUsers}).Validate(); err != nil {
		return fmt.Errorf("broker: --super-users: %w", err)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("broker: --tls-cert-file and --tls-key-file go together")
	}
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		return errors.New("broker: --tls-client-ca-file needs --tls-cert-file and --tls-key-file")
	}
	return c.validateInterBroker()
}

// distinctListeners refuses two listeners on one fixed port of one host:
// the inter-broker listener in particular must not be the client one, or
// clients could reach replication. Port 0 (any free port) never clashes.
func distinctListeners(listens map[string]string) error {
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(listens)) {
		addr := listens[name]
		_, port, _ := net.SplitHostPort(addr)
		if port == "0" {
			continue
		}
		if other, ok := seen[addr]; ok {
			return fmt.Errorf("broker: --%s and --%s are both %q; each listener needs its own port", other, name, addr)
		}
		seen[addr] = name
	}
	return nil
}
