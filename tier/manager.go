package tier

// manager.go owns a broker's tiering service: its configuration, the
// per-partition tiering state (the cached head, when data began waiting for
// upload, whether an upload or a clean-up is running), and the scheduling of
// uploads and retention on the broker's maintenance ticks.
//
// Invariant: at most one upload or retention step runs per partition at a
// time (partState.busy), and at most Config.UploadConcurrency uploads run on
// the broker; Maintain never blocks on object storage: it starts work and
// returns, so produce and fetch never wait for an upload.
// Invariant: every goroutine the manager starts is tracked by wg and ends
// when the context given to Run ends; Close waits for them.
//
// Locking: mu guards parts and each partState's fields. The head inside a
// partState is replaced, never mutated, so a reader that took it keeps a
// consistent view.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/cache"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/wal"
)

// Index is what the manager needs of the remote index in etcd.
type Index interface {
	RemoteHead(ctx context.Context, topicID [16]byte, partition int32) (meta.RemoteHead, error)
	PutRemoteHead(ctx context.Context, h meta.RemoteHead, fence meta.PartitionState) (meta.RemoteHead, error)
	DeleteRemoteHead(ctx context.Context, h meta.RemoteHead) error
}

// Partition is what the manager needs of a local partition replica.
type Partition interface {
	TopicID() [16]byte
	Index() int32
	Log() *wal.Log
	HighWatermark() (wal.Offset, <-chan struct{})
	// DeleteLocalBelow deletes whole local segments below off on the
	// partition's owner, after its producer snapshot is written.
	DeleteLocalBelow(off wal.Offset) (int, error)
	// ProducerSnapshot encodes the partition's producer state.
	ProducerSnapshot() ([]byte, error)
}

// Target is one partition for a maintenance pass.
type Target struct {
	P      Partition
	Policy Policy
	// UploadBytes and UploadMaxDelay are remote.upload.bytes and
	// remote.upload.max.delay.ms.
	UploadBytes    int64
	UploadMaxDelay time.Duration
	// Fence is the partition state this broker leads it at; nil when it is
	// not the leader (then the manager only applies local retention).
	Fence *meta.PartitionState
	Pins  []wal.Offset
}

// Config configures a Manager.
type Config struct {
	Store objstore.Store
	Index Index
	Cache *cache.Cache
	// UploadConcurrency bounds uploads in flight on the broker.
	UploadConcurrency int
	// PutTimeout bounds one object PUT (the store retries inside it).
	PutTimeout time.Duration
	// ChunkBytes is the target chunk size of an object.
	ChunkBytes int
	// MaxObjectsInHead is how many objects a head keeps before the oldest
	// half moves into a manifest.
	MaxObjectsInHead int
	// MaxManifestsInHead is how many manifest references a head keeps
	// before the oldest half moves into a manifest one level up.
	MaxManifestsInHead int
	// ReadAhead is how many chunks a remote reader keeps in flight ahead.
	ReadAhead int
	// Refs is the reference ledger of large payloads (largerefs.go); nil:
	// the leader does not fold it.
	Refs RefLedger
	// RefSettle is how long after a claim its record is surely appended or
	// never will be (0: DefaultRefSettle).
	RefSettle time.Duration
	Now       func() time.Time
	Logger    zerolog.Logger
}

func (c Config) withDefaults() Config {
	if c.UploadConcurrency <= 0 {
		c.UploadConcurrency = 4
	}
	if c.PutTimeout <= 0 {
		c.PutTimeout = 2 * time.Minute
	}
	if c.MaxObjectsInHead <= 0 {
		c.MaxObjectsInHead = 64
	}
	if c.MaxManifestsInHead <= 1 {
		c.MaxManifestsInHead = 32
	}
	if c.ReadAhead <= 0 {
		c.ReadAhead = 4
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

type partKey struct {
	topic [16]byte
	n     int32
}

// partState is the manager's record of one partition; guarded by mu.
type partState struct {
	head      *meta.RemoteHead // nil until read
	waiting   time.Time        // when data above the remote end was first seen; zero if none
	busy      bool             // an upload or retention step runs
	lastError error
	failing   string // the current failure's text, "" while steps succeed; for logging once
}

// Manager tiers a broker's partitions.
type Manager struct {
	cfg   Config
	log   zerolog.Logger
	sem   chan struct{}
	stats stats

	mu        sync.Mutex
	parts     map[partKey]*partState
	manifests map[string]decodedManifest // decoded manifests by key (machine.go)

	wg sync.WaitGroup
}

// New returns a manager; Run must be called for uploads to happen.
func New(cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	if cfg.Store == nil || cfg.Index == nil || cfg.Cache == nil {
		return nil, errors.New("tier: a store, an index and a cache are required")
	}
	return &Manager{
		cfg:       cfg,
		log:       cfg.Logger.With().Str("component", "tier").Logger(),
		sem:       make(chan struct{}, cfg.UploadConcurrency),
		parts:     make(map[partKey]*partState),
		manifests: make(map[string]decodedManifest),
	}, nil
}

// Wait waits for the work Maintain started; call it after cancelling the
// context given to Maintain.
func (m *Manager) Wait() { m.wg.Wait() }

func (m *Manager) state(topicID [16]byte, n int32) *partState {
	k := partKey{topicID, n}
	s := m.parts[k]
	if s == nil {
		s = &partState{}
		m.parts[k] = s
	}
	return s
}

// Forget drops what the manager knows of a partition (closed or moved).
func (m *Manager) Forget(topicID [16]byte, n int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.parts, partKey{topicID, n})
}

// cachedHead returns the cached head, reading it from etcd when there is none.
func (m *Manager) cachedHead(ctx context.Context, topicID [16]byte, n int32) (meta.RemoteHead, error) {
	m.mu.Lock()
	s := m.state(topicID, n)
	h := s.head
	m.mu.Unlock()
	if h != nil {
		return *h, nil
	}
	return m.refreshHead(ctx, topicID, n)
}

// refreshHead reads the head from etcd and caches it.
func (m *Manager) refreshHead(ctx context.Context, topicID [16]byte, n int32) (meta.RemoteHead, error) {
	h, err := m.cfg.Index.RemoteHead(ctx, topicID, n)
	if err != nil {
		return meta.RemoteHead{}, err
	}
	m.setHead(h)
	return h, nil
}

func (m *Manager) setHead(h meta.RemoteHead) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.state(h.TopicID, h.Partition)
	if s.head == nil || s.head.Revision <= h.Revision {
		s.head = &h
	}
}

// Maintain runs one maintenance pass over targets: for each partition not
// already busy it starts, in the background, its retention step and, on a
// leader whose data waited long enough, an upload. It returns at once.
func (m *Manager) Maintain(ctx context.Context, targets []Target) {
	for _, t := range targets {
		id, n := t.P.TopicID(), t.P.Index()
		m.mu.Lock()
		s := m.state(id, n)
		if s.busy {
			m.mu.Unlock()
			continue
		}
		s.busy = true
		m.mu.Unlock()
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer func() {
				m.mu.Lock()
				s.busy = false
				m.mu.Unlock()
			}()
			err := m.maintainOne(ctx, t)
			if ctx.Err() != nil {
				return
			}
			// One WARN when a partition starts failing, or fails
			// differently; the same failure again each pass is DEBUG, and
			// the first success after failures one INFO.
			m.mu.Lock()
			was := s.failing
			s.failing = ""
			if err != nil {
				s.lastError, s.failing = err, err.Error()
			}
			m.mu.Unlock()
			ev := m.log.Debug()
			switch {
			case err != nil && s.failing != was:
				ev = m.log.Warn()
			case err == nil && was != "":
				m.log.Info().Str("topic_id", fmt.Sprintf("%x", id)).Int32("partition", n).Msg("tiering steps succeed again")
				return
			case err == nil:
				return
			}
			ev.Err(err).Str("topic_id", fmt.Sprintf("%x", id)).Int32("partition", n).Msg("tiering step failed; retrying at the next pass")
		}()
	}
}

// maintainOne runs one partition's step: the upload first (so local
// retention can pass what it uploaded), then retention.
func (m *Manager) maintainOne(ctx context.Context, t Target) error {
	var errs []error
	if t.Policy.Tiered && t.Fence != nil {
		if err := m.maybeUpload(ctx, t); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.retain(ctx, t); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Lag is how far a partition's uploads trail its high watermark.
type Lag struct {
	Bytes int64         // local bytes at or above the remote end
	Age   time.Duration // how long the oldest of them has waited (0 if none)
	Range Range
}

// UploadLag reports p's upload lag as this broker knows it.
func (m *Manager) UploadLag(ctx context.Context, p Partition, now time.Time) Lag {
	r, err := m.Range(ctx, p.TopicID(), p.Index())
	if err != nil {
		return Lag{}
	}
	from := max(r.RemoteEnd, p.Log().StartOffset())
	bytes, _ := p.Log().BytesFrom(from)
	lag := Lag{Bytes: bytes, Range: r}
	m.mu.Lock()
	if s := m.parts[partKey{p.TopicID(), p.Index()}]; s != nil && !s.waiting.IsZero() && bytes > 0 {
		lag.Age = now.Sub(s.waiting)
	}
	m.mu.Unlock()
	return lag
}

// Objects lists the partition's committed objects from its head and
// manifests, in offset order, reading the head from etcd.
func (m *Manager) Objects(ctx context.Context, topicID [16]byte, n int32) ([]RemoteObject, meta.RemoteHead, error) {
	h, err := m.refreshHead(ctx, topicID, n)
	if err != nil {
		return nil, h, err
	}
	objs, err := m.objectsFrom(ctx, h, -1)
	return objs, h, err
}
