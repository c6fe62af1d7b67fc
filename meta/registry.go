package meta

// This file owns the broker registry: one key per live broker, bound to an
// etcd lease the broker keeps alive (Register, Registration), the listing of
// live brokers (Brokers) and a stream of that list (WatchBrokers).
//
//	<prefix>brokers/<node id>
//	{"v":1,"node_id":2,"az":"eu-west-1b","kafka":"10.0.0.2:9092",
//	 "http":"10.0.0.2:8080","inter_broker":"10.0.0.2:9093",
//	 "pool":"gold","started_ms":1767000000000}
//
// "inter_broker" (optional in version 1: a record without it was written by
// a build without the inter-broker listener) is where the other brokers
// fetch replicas and send election messages; it is never given to clients.
//
// Invariant: a broker key is only created by a transaction conditioned on
// its absence (CreateRevision == 0) and always with a lease, so a node id
// is held by at most one live lease (one incarnation) at a time, and the key
// disappears when that lease is revoked or expires.
// Invariant: a Registration never rewrites or deletes a key it did not
// create; it ends by revoking its own lease. The one lease it revokes that
// is not its own is the one its caller names as its dead predecessor's
// (RegisterTakingOver), and only while that lease holds the key.
//
// Each Registration owns one keep-alive goroutine, counted in
// Store.watchers so that Store.Close stops it; Registration.mu guards
// closed. Each WatchBrokers call owns one goroutine, also in Store.watchers;
// its broker map and revision are local to it.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// brokerRecordVersion is the "v" field this build writes and reads.
const brokerRecordVersion = 1

// DefaultRegistrationTTL is the lease TTL Register uses when given zero.
const DefaultRegistrationTTL = 10 * time.Second

// revokeTimeout bounds the lease revoke of a failed Register.
const revokeTimeout = 5 * time.Second

var (
	// ErrNodeIDInUse: another live lease (another incarnation) holds the node id.
	ErrNodeIDInUse = errors.New("meta: node id already registered")
	// ErrInvalidBroker: a BrokerInfo that cannot be registered.
	ErrInvalidBroker = errors.New("meta: invalid broker info")
)

// BrokerInfo is what a live broker tells the cluster about itself.
type BrokerInfo struct {
	NodeID int32
	// AZ is the availability zone (--az); placement spreads replicas over AZs.
	AZ string
	// Kafka is the advertised Kafka host:port given to clients.
	Kafka string
	// HTTP is the advertised HTTP API host:port.
	HTTP string
	// InterBroker is the advertised inter-broker host:port (replica
	// fetches and election messages), never given to clients; "" in a
	// record of a build that had none.
	InterBroker string
	// Listeners is the advertised host:port of each Kafka listener, by
	// listener name (--listeners, --advertised-listeners): Metadata and
	// FindCoordinator answer a client with the brokers' addresses of the
	// listener it came in on. Nil in a record of a build without
	// listeners, whose only listener is Kafka.
	Listeners map[string]string
	// Pool is the broker's pool (--pool): a tenant bound to a pool has
	// its partitions placed on that pool's brokers only. "" is
	// DefaultPool, as in a record of a build without pools.
	Pool string
	// Started is when the broker process started; Register fills in now if zero.
	// Stored with millisecond precision.
	Started time.Time
	// Incarnation is the create revision of the broker's key: it differs for
	// every registration of the same node id. Not stored; 0 before Register.
	Incarnation int64
	// Lease is the etcd lease the key is bound to. Not stored.
	Lease clientv3.LeaseID
}

// Validate reports the first problem with b, wrapping ErrInvalidBroker.
func (b BrokerInfo) Validate() error {
	if b.NodeID < 0 {
		return fmt.Errorf("%w: node id %d is negative", ErrInvalidBroker, b.NodeID)
	}
	if strings.TrimSpace(b.AZ) == "" {
		return fmt.Errorf("%w: node %d: empty availability zone", ErrInvalidBroker, b.NodeID)
	}
	for _, a := range []struct{ name, addr string }{{"kafka", b.Kafka}, {"http", b.HTTP}} {
		if err := validateHostPort(a.addr); err != nil {
			return fmt.Errorf("%w: node %d: %s address %q: %w", ErrInvalidBroker, b.NodeID, a.name, a.addr, err)
		}
	}
	if b.InterBroker != "" {
		if err := validateHostPort(b.InterBroker); err != nil {
			return fmt.Errorf("%w: node %d: inter-broker address %q: %w", ErrInvalidBroker, b.NodeID, b.InterBroker, err)
		}
	}
	if b.Pool != "" {
		if err := ValidatePoolName(b.Pool); err != nil {
			return fmt.Errorf("%w: node %d: %w", ErrInvalidBroker, b.NodeID, err)
		}
	}
	for name, addr := range b.Listeners {
		if name == "" {
			return fmt.Errorf("%w: node %d: a listener without a name", ErrInvalidBroker, b.NodeID)
		}
		if err := validateHostPort(addr); err != nil {
			return fmt.Errorf("%w: node %d: listener %s address %q: %w", ErrInvalidBroker, b.NodeID, name, addr, err)
		}
	}
	return nil
}

// DefaultPool is the pool of a broker started without --pool and of a
// tenant bound to none.
const DefaultPool = "shared"

// ValidatePoolName accepts the names of tenants' rule: 1 to 64 characters
// of [a-z0-9_-] starting with a letter.
func ValidatePoolName(name string) error {
	if err := ValidateTenantName(name); err != nil {
		return fmt.Errorf("%w: pool %q: 1 to %d characters of [a-z0-9_-], starting with a letter", ErrInvalidName, name, maxTenantNameLen)
	}
	return nil
}

// PoolOrDefault is pool, or DefaultPool for "".
func PoolOrDefault(pool string) string {
	if pool == "" {
		return DefaultPool
	}
	return pool
}

// omitDefaultPool stores DefaultPool as nothing, so the records of brokers
// and tenants that never chose a pool read the same in every build.
func omitDefaultPool(pool string) string {
	if pool == DefaultPool {
		return ""
	}
	return pool
}

// validateHostPort accepts a non-empty host and a port in 1..65535: an
// advertised address must be dialable, so ":9092" is refused.
func validateHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return errors.New("missing host")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > math.MaxUint16 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// brokerRecord is the stored JSON form of a BrokerInfo.
type brokerRecord struct {
	V           int    `json:"v"`
	NodeID      int32  `json:"node_id"`
	AZ          string `json:"az"`
	Kafka       string `json:"kafka"`
	HTTP        string `json:"http"`
	InterBroker string `json:"inter_broker,omitempty"`
	// Listeners was added within version 1: a reader that does not know
	// it ignores it, and a record without it has the Kafka listener only.
	Listeners map[string]string `json:"listeners,omitempty"`
	// Pool was added within version 1: a record without it (or a broker
	// in DefaultPool) reads as DefaultPool.
	Pool      string `json:"pool,omitempty"`
	StartedMs int64  `json:"started_ms"`
}

func encodeBroker(b BrokerInfo) ([]byte, error) {
	v, err := json.Marshal(brokerRecord{
		V:           brokerRecordVersion,
		NodeID:      b.NodeID,
		AZ:          b.AZ,
		Kafka:       b.Kafka,
		HTTP:        b.HTTP,
		InterBroker: b.InterBroker,
		Listeners:   b.Listeners,
		StartedMs:   b.Started.UnixMilli(),
		Pool:        omitDefaultPool(b.Pool),
	})
	if err != nil {
		return nil, fmt.Errorf("meta: encode broker %d: %w", b.NodeID, err)
	}
	return v, nil
}

// decodeBroker decodes kv, a key under brokersPrefix.
func (s *Store) decodeBroker(kv *mvccpb.KeyValue) (BrokerInfo, error) {
	name := strings.TrimPrefix(string(kv.Key), s.brokersPrefix())
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != name {
		return BrokerInfo{}, fmt.Errorf("meta: broker key %q: %w", kv.Key, ErrCorrupt)
	}
	var r brokerRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return BrokerInfo{}, fmt.Errorf("meta: decode broker %d: %w: %w", id, ErrCorrupt, err)
	}
	switch {
	case r.V > brokerRecordVersion:
		return BrokerInfo{}, fmt.Errorf("meta: decode broker %d: version %d, this build knows %d: %w", id, r.V, brokerRecordVersion, ErrUnknownVersion)
	case r.V != brokerRecordVersion:
		return BrokerInfo{}, fmt.Errorf("meta: decode broker %d: version %d: %w", id, r.V, ErrCorrupt)
	case int64(r.NodeID) != id:
		return BrokerInfo{}, fmt.Errorf("meta: decode broker %d: record says node %d: %w", id, r.NodeID, ErrCorrupt)
	}
	return BrokerInfo{
		NodeID:      r.NodeID,
		AZ:          r.AZ,
		Kafka:       r.Kafka,
		HTTP:        r.HTTP,
		InterBroker: r.InterBroker,
		Listeners:   r.Listeners,
		Pool:        PoolOrDefault(r.Pool),
		Started:     time.UnixMilli(r.StartedMs),
		Incarnation: kv.CreateRevision,
		Lease:       clientv3.LeaseID(kv.Lease),
	}, nil
}

func (s *Store) brokersPrefix() string { return s.prefix + "brokers/" }
func (s *Store) brokerKey(id int32) string {
	return s.brokersPrefix() + strconv.FormatInt(int64(id), 10)
}

// checkOpen fails with ErrClosed once Close has begun: a closed client
// retries for seconds before it says so.
func (s *Store) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// own counts a goroutine the Store must stop and wait for in Close; false
// means the Store is closed and the goroutine must not start.
func (s *Store) own() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.watchers.Add(1)
	return true
}

// Registration is a broker's live entry in the registry. Its lease is kept
// alive until Close, the Store's Close, or the lease is lost.
type Registration struct {
	s      *Store
	info   BrokerInfo // as stored, with Incarnation and Lease
	cancel context.CancelFunc
	lost   chan struct{} // closed when the lease is no longer kept alive, unless by Close
	done   chan struct{} // closed when the keep-alive goroutine has returned

	mu     sync.Mutex
	closed bool // guarded by mu: Close has begun
	// heldUntil is an instant before which the lease surely has not
	// expired on the etcd servers (HeldUntil); guarded by mu.
	heldUntil time.Time
}

// Register puts b under <prefix>brokers/<node id>, bound to a new lease of
// ttl (DefaultRegistrationTTL if zero; rounded up to whole seconds, and etcd
// may raise it to its minimum) that the Registration keeps alive. It fails
// with ErrNodeIDInUse while another lease holds the node id: a broker
// restarted within the old incarnation's TTL must wait for it to expire,
// unless it knows the old incarnation's lease (RegisterTakingOver).
func (s *Store) Register(ctx context.Context, b BrokerInfo, ttl time.Duration) (*Registration, error) {
	return s.register(ctx, b, ttl, 0)
}

// RegisterTakingOver is Register, except that a key held by lease prev
// (this node's previous incarnation, which the caller knows is dead: the
// broker holds its data directory's lock, and the directory recorded prev)
// is taken over: prev is revoked and the registration retried once. A key
// held by any other lease is still ErrNodeIDInUse; so is one taken by
// another lease between the revoke and the retry. prev 0 is Register.
func (s *Store) RegisterTakingOver(ctx context.Context, b BrokerInfo, ttl time.Duration, prev clientv3.LeaseID) (*Registration, error) {
	return s.register(ctx, b, ttl, prev)
}

func (s *Store) register(ctx context.Context, b BrokerInfo, ttl time.Duration, prev clientv3.LeaseID) (*Registration, error) {
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("meta: register broker: %w", err)
	}
	if ttl < 0 {
		return nil, fmt.Errorf("meta: register broker %d: negative ttl %v: %w", b.NodeID, ttl, ErrInvalidBroker)
	}
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("meta: register broker %d: %w", b.NodeID, err)
	}
	if ttl == 0 {
		ttl = DefaultRegistrationTTL
	}
	if b.Started.IsZero() {
		b.Started = time.Now()
	}
	b.Started = time.UnixMilli(b.Started.UnixMilli())
	val, err := encodeBroker(b)
	if err != nil {
		return nil, err
	}
	asked := time.Now() // the lease cannot start before it is asked for
	grant, err := s.client.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return nil, fmt.Errorf("meta: register broker %d: grant lease: %w", b.NodeID, err)
	}
	held := asked.Add(time.Duration(grant.TTL) * time.Second)
	b.Lease = grant.ID
	rev, holder, err := s.putBroker(ctx, b, val)
	if err == nil && holder != nil && prev != 0 && clientv3.LeaseID(holder.Lease) == prev {
		s.log.Info().Int32("node_id", b.NodeID).Str("lease", fmt.Sprintf("%x", int64(prev))).
			Int64("incarnation", holder.CreateRevision).Msg("taking over the previous incarnation's registration")
		if _, err = s.client.Revoke(ctx, prev); errors.Is(err, rpctypes.ErrLeaseNotFound) {
			err = nil // expired meanwhile
		}
		if err == nil {
			rev, holder, err = s.putBroker(ctx, b, val)
		}
	}
	if err != nil || holder != nil {
		s.revokeQuietly(grant.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("meta: register broker %d: %w", b.NodeID, err)
	}
	if holder != nil {
		return nil, fmt.Errorf("meta: register broker %d: %w: node %d is held by lease %x since revision %d",
			b.NodeID, ErrNodeIDInUse, b.NodeID, holder.Lease, holder.CreateRevision)
	}
	b.Incarnation = rev
	return s.keepRegistered(b, held)
}

// putBroker creates b's key with value val under b.Lease if it is absent,
// and returns the revision it was created at; or, if the key is held, the
// key as it is (holder).
func (s *Store) putBroker(ctx context.Context, b BrokerInfo, val []byte) (rev int64, holder *mvccpb.KeyValue, err error) {
	key := s.brokerKey(b.NodeID)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(b.Lease))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return 0, nil, err
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil, nil
	}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
		return 0, kvs[0], nil
	}
	return 0, nil, fmt.Errorf("%s present but unreadable: %w", key, ErrCorrupt) // cannot happen in one txn
}

// keepRegistered starts the keep-alive of a freshly written registration.
func (s *Store) keepRegistered(b BrokerInfo, held time.Time) (*Registration, error) {
	kctx, cancel := context.WithCancel(context.Background())
	ka, err := s.client.KeepAlive(kctx, b.Lease)
	if err == nil && !s.own() {
		err = ErrClosed
	}
	if err != nil {
		cancel()
		s.revokeQuietly(b.Lease)
		return nil, fmt.Errorf("meta: register broker %d: keep lease alive: %w", b.NodeID, err)
	}
	r := &Registration{s: s, info: b, cancel: cancel, lost: make(chan struct{}), done: make(chan struct{}),
		heldUntil: held}
	go r.keepAlive(ka)
	s.log.Info().Int32("node_id", b.NodeID).Str("az", b.AZ).Int64("incarnation", b.Incarnation).
		Str("lease", fmt.Sprintf("%x", int64(b.Lease))).Msg("broker registered")
	return r, nil
}

// revokeQuietly revokes a lease this Store granted and no longer needs;
// failure only delays the key's removal until the TTL, so it is logged.
func (s *Store) revokeQuietly(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	if _, err := s.client.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.log.Warn().Err(err).Str("lease", fmt.Sprintf("%x", int64(id))).Msg("revoke lease failed; it will expire")
	}
}

// ttlSeconds is d in whole seconds, rounded up, at least 1.
func ttlSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

// keepAlive drains the lease's keep-alive responses. clientv3 closes ka
// when the lease is revoked or expired, when the server cannot be reached
// for a TTL, or when kctx is cancelled (Close).
func (r *Registration) keepAlive(ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer r.s.watchers.Done()
	defer close(r.done)
	defer r.cancel()
	for {
		select {
		case resp, ok := <-ka:
			if ok {
				r.renewed(resp)
				continue
			}
			if !r.closing() {
				r.s.log.Error().Int32("node_id", r.info.NodeID).Int64("incarnation", r.info.Incarnation).
					Msg("broker registration lost: lease expired or revoked")
				close(r.lost)
			}
			return
		case <-r.s.done:
			// The Store is closing: the lease is left to expire.
			if !r.closing() {
				close(r.lost)
			}
			return
		}
	}
}

func (r *Registration) closing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Info is the registered BrokerInfo, with its Incarnation and Lease.
func (r *Registration) Info() BrokerInfo { return r.info }

// renewed takes in a keep-alive answer. The renewal happened on the server
// at most one round trip before it arrived, so the lease holds at least
// until arrival + TTL - round trip; taking half the TTL for the round trip
// keeps HeldUntil safe while round trips stay under TTL/2 (5 s by default).
func (r *Registration) renewed(resp *clientv3.LeaseKeepAliveResponse) {
	if resp.TTL <= 0 {
		return
	}
	until := time.Now().Add(time.Duration(resp.TTL) * time.Second / 2)
	r.mu.Lock()
	if until.After(r.heldUntil) {
		r.heldUntil = until
	}
	r.mu.Unlock()
}

// HeldUntil is an instant (on this process's monotonic clock) before which
// the registration's lease has surely not expired in etcd, so no other
// broker can have been told that this one is gone. A broker that was
// paused, or cut off from etcd, finds it in the past when it resumes,
// before the keep-alive goroutine has even noticed the loss.
func (r *Registration) HeldUntil() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.heldUntil
}

// Lost is closed when the registration ends other than by Close: its lease
// was revoked or expired (etcd unreachable for longer than the TTL), or the
// Store was closed. A lost registration is not renewed; register again.
func (r *Registration) Lost() <-chan struct{} { return r.lost }

// Close stops the keep-alive and revokes the lease, so the broker's key
// disappears at once. It is idempotent; a revoke failure is returned (the
// key then lasts until the TTL runs out).
func (r *Registration) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	<-r.done
	select {
	case <-r.lost:
		return nil // nothing left to revoke
	default:
	}
	_, err := r.s.client.Revoke(ctx, r.info.Lease)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("meta: deregister broker %d: revoke lease: %w", r.info.NodeID, err)
	}
	r.s.log.Info().Int32("node_id", r.info.NodeID).Msg("broker deregistered")
	return nil
}

// Brokers lists the live brokers, sorted by node id.
func (s *Store) Brokers(ctx context.Context) ([]BrokerInfo, error) {
	brokers, _, err := s.listBrokers(ctx, false)
	return brokers, err
}

// listBrokers reads every broker key and the revision it was read at. With
// skipCorrupt an undecodable key is logged and left out instead of failing.
func (s *Store) listBrokers(ctx context.Context, skipCorrupt bool) ([]BrokerInfo, int64, error) {
	resp, err := s.client.Get(ctx, s.brokersPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("meta: list brokers: %w", err)
	}
	brokers := make([]BrokerInfo, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		b, err := s.decodeBroker(kv)
		if err != nil {
			if !skipCorrupt {
				return nil, 0, err
			}
			s.log.Error().Err(err).Msg("broker watch: skipping undecodable broker")
			continue
		}
		brokers = append(brokers, b)
	}
	slices.SortFunc(brokers, byNodeID)
	return brokers, resp.Header.Revision, nil
}

func byNodeID(a, b BrokerInfo) int { return cmp.Compare(a.NodeID, b.NodeID) }

// sameBroker reports whether a and b are the same incarnation with the same record.
func sameBroker(a, b BrokerInfo) bool {
	return a.NodeID == b.NodeID && a.Incarnation == b.Incarnation && a.Lease == b.Lease &&
		a.AZ == b.AZ && a.Kafka == b.Kafka && a.HTTP == b.HTTP && a.InterBroker == b.InterBroker &&
		a.Started.Equal(b.Started)
}

// WatchBrokers streams the list of live brokers, sorted by node id: first
// the list at the call (or, if that read fails, the first list read later),
// then the whole list after every change. Lists
// replace each other: a reader that falls behind receives only the newest
// (the channel holds one), so it never blocks the watcher and never misses
// the current state, but may skip intermediate ones. The channel closes when
// ctx ends or the Store closes.
func (s *Store) WatchBrokers(ctx context.Context) <-chan []BrokerInfo {
	out := make(chan []BrokerInfo, 1)
	if !s.own() {
		close(out)
		return out
	}
	w := &brokerWatcher{s: s, out: out}
	w.resync(ctx) // on success the list at the call is queued before WatchBrokers returns
	go w.run(ctx)
	return out
}

// brokerWatcher is the state of one WatchBrokers goroutine.
type brokerWatcher struct {
	s     *Store
	out   chan []BrokerInfo
	known map[int32]BrokerInfo // live brokers as of rev
	rev   int64                // revision known reflects; 0 = must resync
}

func (w *brokerWatcher) run(ctx context.Context) {
	defer w.s.watchers.Done()
	defer close(w.out)
	w.s.watchLoop(ctx, w)
}

func (w *brokerWatcher) synced() bool { return w.rev != 0 }

// resync re-reads the broker list and publishes it if it changed.
func (w *brokerWatcher) resync(ctx context.Context) bool {
	brokers, rev, err := w.s.listBrokers(ctx, true)
	if err != nil {
		if ctx.Err() == nil {
			w.s.log.Warn().Err(err).Msg("broker watch: resync failed")
		}
		return false
	}
	current := make(map[int32]BrokerInfo, len(brokers))
	for _, b := range brokers {
		current[b.NodeID] = b
	}
	if w.known == nil || !maps.EqualFunc(current, w.known, sameBroker) {
		w.publish(brokers)
	}
	w.known, w.rev = current, rev
	return true
}

// watch follows etcd's watch from rev+1 until it ends, publishing the list
// after each batch of events; it reports whether any events arrived.
func (w *brokerWatcher) watch(ctx context.Context) bool {
	wch := w.s.client.Watch(clientv3.WithRequireLeader(ctx), w.s.brokersPrefix(),
		clientv3.WithPrefix(), clientv3.WithRev(w.rev+1))
	progressed := false
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision != 0 {
				w.s.log.Warn().Int64("revision", w.rev).Msg("broker watch: revision compacted; resyncing")
				w.rev = 0
				return true
			}
			if ctx.Err() == nil {
				w.s.log.Warn().Err(err).Msg("broker watch interrupted")
			}
			return progressed
		}
		changed := false
		for _, ev := range resp.Events {
			progressed = true
			w.rev = ev.Kv.ModRevision
			changed = w.apply(ev) || changed
		}
		if changed {
			w.publish(slices.SortedFunc(maps.Values(w.known), byNodeID))
		}
	}
	return progressed
}

// apply applies one etcd event to known and reports whether it changed.
func (w *brokerWatcher) apply(ev *clientv3.Event) bool {
	if ev.Type == mvccpb.PUT {
		b, err := w.s.decodeBroker(ev.Kv)
		if err != nil {
			w.s.log.Error().Err(err).Msg("broker watch: skipping undecodable broker")
			return false
		}
		w.known[b.NodeID] = b
		return true
	}
	name := strings.TrimPrefix(string(ev.Kv.Key), w.s.brokersPrefix())
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return false
	}
	if _, ok := w.known[int32(id)]; !ok {
		return false
	}
	delete(w.known, int32(id))
	return true
}

// publish replaces any list the reader has not taken yet with brokers. The
// watcher is the only sender, so after the drain the send cannot block.
func (w *brokerWatcher) publish(brokers []BrokerInfo) {
	select {
	case <-w.out:
	default:
	}
	w.out <- brokers
}
