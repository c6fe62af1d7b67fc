package fault

// fault.go owns the wrapper Store: its per-operation fault settings, the
// seeded generator that decides each fault, and the counters of what it
// injected.
//
// Invariant: a fault decided before a call keeps the call from reaching the
// inner store; only a lost response and a truncated body come after it.
// Invariant: no injected wait outlives the call's context, nor MaxBlock.
// Store.mu guards the settings, the generator and down; the counters are
// atomic.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// Op names a Store method.
type Op int

// The operations, one per Store method.
const (
	OpPut Op = iota
	OpGet
	OpHead
	OpList
	OpDelete
	// The multipart operations (multipart.go).
	OpCreateMultipart
	OpUploadPart
	OpListParts
	OpCompleteMultipart
	OpAbortMultipart
	numOps
)

var opNames = [numOps]string{"put", "get", "head", "list", "delete",
	"create-multipart", "upload-part", "list-parts", "complete-multipart", "abort-multipart"}

func (o Op) String() string {
	if o < 0 || o >= numOps {
		return fmt.Sprintf("op(%d)", int(o))
	}
	return opNames[o]
}

// Kind names a kind of injected fault.
type Kind int

// The kinds of fault, as counted by Count.
const (
	KindLatency Kind = iota
	KindServerError
	KindThrottle
	KindTimeout
	KindLostResponse
	KindTruncate
	KindDown
	numKinds
)

var kindNames = [numKinds]string{"latency", "server-error", "throttle", "timeout", "lost-response", "truncate", "down"}

func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// Faults are the faults injected into one operation. Rates are probabilities
// in [0, 1], decided independently for each call.
type Faults struct {
	Latency          time.Duration // added to every call
	Jitter           time.Duration // plus a uniform [0, Jitter)
	ServerErrorRate  float64       // HTTP 500 InternalError before the call
	ThrottleRate     float64       // HTTP 503 SlowDown before the call
	TimeoutRate      float64       // block until the deadline before the call
	LostResponseRate float64       // Put: store, then fail
	TruncateRate     float64       // Get: return a strict prefix of the bytes
}

// Config configures a Store.
type Config struct {
	Seed uint64 // seeds the generator: the same seed and calls give the same faults
	// MaxBlock bounds a timeout fault of a call without a deadline; 0 means 5 s.
	MaxBlock time.Duration
	Logger   zerolog.Logger // one debug line per fault; zero value discards
}

// Store is an objstore.Store that injects faults into an inner one.
type Store struct {
	inner    objstore.Store
	maxBlock time.Duration
	log      zerolog.Logger

	mu     sync.Mutex
	faults [numOps]Faults // guarded by mu
	rng    *rand.Rand     // guarded by mu
	down   bool           // guarded by mu

	counts [numKinds]atomic.Int64
}

var _ objstore.Store = (*Store)(nil)

// New wraps inner; it injects nothing until Set or SetDown.
func New(inner objstore.Store, cfg Config) *Store {
	if cfg.MaxBlock <= 0 {
		cfg.MaxBlock = 5 * time.Second
	}
	return &Store{
		inner:    inner,
		maxBlock: cfg.MaxBlock,
		log:      cfg.Logger.With().Str("component", "objstore-fault").Logger(),
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
	}
}

// Set replaces the faults of op.
func (s *Store) Set(op Op, f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = f
}

// SetAll replaces the faults of every operation.
func (s *Store) SetAll(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for op := range s.faults {
		s.faults[op] = f
	}
}

// SetDown makes every call fail (true) or go through again (false).
func (s *Store) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Count returns how many faults of kind were injected.
func (s *Store) Count(k Kind) int64 { return s.counts[k].Load() }

// Counts returns the number of injected faults of every kind that occurred.
func (s *Store) Counts() map[Kind]int64 {
	m := make(map[Kind]int64)
	for k := range numKinds {
		if n := s.counts[k].Load(); n > 0 {
			m[k] = n
		}
	}
	return m
}

// Inner returns the wrapped store, for checking what really happened.
func (s *Store) Inner() objstore.Store { return s.inner }

// plan is what the generator decided for one call.
type plan struct {
	down        bool
	wait        time.Duration
	before      Kind // KindServerError, KindThrottle, KindTimeout, or -1
	lost, trunc bool
	truncFrac   float64 // the share of the bytes a truncated Get keeps, in [0, 1)
}

// decide rolls the faults of one call of op.
func (s *Store) decide(op Op) plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults[op]
	p := plan{down: s.down, before: -1, wait: f.Latency}
	if p.down {
		return p
	}
	if f.Jitter > 0 {
		p.wait += time.Duration(s.rng.Int64N(int64(f.Jitter)))
	}
	switch {
	case s.roll(f.TimeoutRate):
		p.before = KindTimeout
	case s.roll(f.ServerErrorRate):
		p.before = KindServerError
	case s.roll(f.ThrottleRate):
		p.before = KindThrottle
	}
	p.lost = op == OpPut && s.roll(f.LostResponseRate)
	if op == OpGet && s.roll(f.TruncateRate) {
		p.trunc, p.truncFrac = true, s.rng.Float64()
	}
	return p
}

// roll returns true with probability rate; s.mu is held.
func (s *Store) roll(rate float64) bool {
	return rate > 0 && s.rng.Float64() < rate
}

// before injects the faults that come before a call reaches the inner store;
// a non-nil error ends the call.
func (s *Store) before(ctx context.Context, op Op, key string, p plan) error {
	if p.down {
		return s.inject(&Error{Kind: KindDown, Op: op, Key: key, Err: syscall.ECONNREFUSED})
	}
	if p.wait > 0 {
		s.counts[KindLatency].Add(1)
		t := time.NewTimer(p.wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("fault: %s %q: %w", op, key, ctx.Err())
		}
	}
	switch p.before {
	case KindTimeout:
		t := time.NewTimer(s.maxBlock)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return s.inject(&Error{Kind: KindTimeout, Op: op, Key: key, Err: ctx.Err()})
		case <-t.C:
			return s.inject(&Error{Kind: KindTimeout, Op: op, Key: key, Err: syscall.ETIMEDOUT})
		}
	case KindServerError, KindThrottle:
		return s.inject(&Error{Kind: p.before, Op: op, Key: key})
	}
	return nil
}

// inject counts and logs e and returns it.
func (s *Store) inject(e *Error) error {
	s.counts[e.Kind].Add(1)
	s.log.Debug().Stringer("kind", e.Kind).Stringer("op", e.Op).Str("key", e.Key).Msg("injected fault")
	return e
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, body []byte) error {
	p := s.decide(OpPut)
	if err := s.before(ctx, OpPut, key, p); err != nil {
		return err
	}
	if err := s.inner.Put(ctx, key, body); err != nil {
		return err
	}
	if p.lost {
		return s.inject(&Error{Kind: KindLostResponse, Op: OpPut, Key: key})
	}
	return nil
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	p := s.decide(OpGet)
	if err := s.before(ctx, OpGet, key, p); err != nil {
		return nil, err
	}
	b, err := s.inner.Get(ctx, key, off, n)
	if err != nil || !p.trunc || len(b) == 0 {
		return b, err
	}
	s.counts[KindTruncate].Add(1)
	keep := int(p.truncFrac * float64(len(b)))
	s.log.Debug().Str("key", key).Int("asked", len(b)).Int("kept", keep).Msg("injected truncated body")
	return b[:keep], nil
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.Info, error) {
	if err := s.before(ctx, OpHead, key, s.decide(OpHead)); err != nil {
		return objstore.Info{}, err
	}
	return s.inner.Head(ctx, key)
}

// List implements objstore.Store. Faults apply to the call as a whole.
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	if err := s.before(ctx, OpList, prefix, s.decide(OpList)); err != nil {
		return err
	}
	return s.inner.List(ctx, prefix, fn)
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.before(ctx, OpDelete, key, s.decide(OpDelete)); err != nil {
		return err
	}
	return s.inner.Delete(ctx, key)
}

// Error is an injected failure. It is retriable (objstore.IsRetriable), and
// reads like the S3 error it imitates (HTTPStatusCode, ErrorCode).
type Error struct {
	Kind Kind
	Op   Op
	Key  string
	Err  error // the underlying cause for KindTimeout and KindDown, else nil
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("fault: injected %s on %s %q", e.Kind, e.Op, e.Key)
	if code := e.ErrorCode(); code != "" {
		msg += fmt.Sprintf(": %d %s", e.HTTPStatusCode(), code)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause (a context error, ECONNREFUSED, ETIMEDOUT) or nil.
func (e *Error) Unwrap() error { return e.Err }

// Retriable marks every injected fault as transient for objstore.IsRetriable
// (which still says no to a caller's own cancellation).
func (e *Error) Retriable() bool { return true }

// HTTPStatusCode is the status of the response imitated, or 0 for none.
func (e *Error) HTTPStatusCode() int {
	switch e.Kind {
	case KindServerError, KindLostResponse:
		return 500
	case KindThrottle:
		return 503
	}
	return 0
}

// ErrorCode is the S3 error code imitated, or "" for none.
func (e *Error) ErrorCode() string {
	switch e.Kind {
	case KindServerError, KindLostResponse:
		return "InternalError"
	case KindThrottle:
		return "SlowDown"
	}
	return ""
}
