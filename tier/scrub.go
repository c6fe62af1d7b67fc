package tier

// scrub.go owns the orphan scrub (docs/architecture.md) that the broker and
// `tierctl diff` share: Diff compares the bucket with what the heads in etcd
// name, and Scrub deletes the orphans Diff found old enough, at a bounded
// rate.
//
// An orphan is an object or manifest of ours (ParseKey) that no head, no
// manifest and no intent names: a PUT whose head write lost (a deposed
// leader, a crash between PUT and intent resolution that nobody resolved),
// or a manifest spilled by a head write that failed. Such keys are never
// named again (keys.go: every key is fresh), so deleting them is safe once
// the writer that PUT them has had the grace period to write the head that
// names them.
//
// Diff lists the bucket first and reads the heads after. An upload records
// its intent before its PUT (upload.go), so every upload object the listing
// holds was named in etcd before the heads were read: the heads name it (an
// intent, an object, a manifest), unless its upload really was abandoned.
// Reading the heads first would let an intent land between the two reads
// and its object look unnamed. What the order cannot cover is a manifest,
// PUT before the head write that names it: that window is the grace's.
//
// How old an orphan is never compares the scrubber's clock with the store's
// (a skewed S3, a stepped NTP clock or a shifted test clock would make a
// fresh PUT look old). Two rules, each on one clock:
//   - with Sightings (the broker's scrub): an orphan is removable once an
//     earlier pass saw it unnamed at least the grace before this pass's
//     listing ended, both on the scrubber's own monotonic clock. Its PUT had
//     ended before the earlier listing did, so its writer has had the grace
//     by the time this pass reads the heads.
//   - without (a one-shot `tierctl diff`): its age is the store's clock
//     against the store's clock, the newest LastModified in the listing
//     minus its own (or an instant the operator gives). The newest
//     LastModified is a PUT the listing already saw, so the age errs young.
//
// Invariant: Scrub deletes only keys Diff classified as removable orphans:
// keys we wrote (never a foreign key), named by nothing in heads read after
// the listing, old enough by one of the rules above, and not of a partition
// one of whose manifests is missing or unreadable (its objects would look
// unnamed).
// Invariant: Diff fails rather than classify with a partial view: a head
// list or a manifest it cannot read is an error, not an empty set.
// Invariant: Diff never subtracts a time of one clock from a time of
// another.
//
// TokenBucket.mu guards its tokens and last refill; Sightings is used by one
// goroutine at a time (the controller's scrub loop); the rest is immutable.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/objstore"
)

// DiffReport is the bucket compared with the heads.
type DiffReport struct {
	Heads      int // heads compared
	Listed     int // keys in the bucket
	Referenced int // listed keys some head, manifest or intent names
	// StoreNow is the store's time the ages are judged at: the newest
	// LastModified listed, or DiffConfig.StoreNow.
	StoreNow time.Time
	// Orphans are our keys that nothing names, in key order.
	Orphans []Orphan
	// Missing are keys a head or manifest names, at or above its clean
	// offset, that the bucket lacks: data loss, or a bucket that is not
	// this cluster's.
	Missing []Missing
	// Foreign are keys that are not ours (ParseKey refuses them); never
	// deleted.
	Foreign []objstore.Info
}

// Orphan is a key of ours that nothing names.
type Orphan struct {
	objstore.Info
	KeyInfo
	// Age is StoreNow minus its LastModified: both on the store's clock.
	Age time.Duration
	// SeenFor is how long the scrubber has seen it unnamed on its own
	// clock (Sightings); 0 on its first sighting or without Sightings.
	SeenFor time.Duration
	// Removable: old enough by the rule in use (the file's comment), and
	// Held is empty.
	Removable bool
	// Held says why a key old enough is kept anyway ("" if it is not).
	Held string
}

// Missing is a named key absent from the bucket.
type Missing struct {
	Key        string
	TopicID    [16]byte
	Partition  int32
	Base, Next int64 // the offsets it covers
	Manifest   bool
	// NamedBy is "head" or the key of the manifest that lists it.
	NamedBy string
}

// Removable counts the orphans Scrub would delete.
func (r DiffReport) Removable() int {
	n := 0
	for _, o := range r.Orphans {
		if o.Removable {
			n++
		}
	}
	return n
}

// HeadsFunc reads all of the cluster's heads (meta.Store.RemoteHeads).
type HeadsFunc func(ctx context.Context) ([]meta.RemoteHead, error)

// DiffConfig is how Diff judges what it finds.
type DiffConfig struct {
	// Grace is how long a writer may take from its PUT to the head write
	// that names the key (the brokers' TierGrace).
	Grace time.Duration
	// Now judges the heads' pending clean targets, which the leaders set
	// on their own clocks: an object below one whose grace has run may be
	// gone. It is never compared with a time the store gave.
	Now time.Time
	// Seen, when set, is the scrubber's memory of earlier passes, and the
	// age rule is its (the file's comment). Without it the age is judged
	// on the store's clock.
	Seen *Sightings
	// StoreNow, when not zero, is the store's time to judge ages at
	// instead of the newest LastModified listed (`tierctl diff --now`).
	StoreNow time.Time
}

// Sightings remembers since when each orphan has been seen unnamed, on the
// scrubber's own clock. A controller that starts over (a restart, a new
// controller) starts with none, which only delays deletions by a grace.
type Sightings struct {
	now   func() time.Time
	first map[string]time.Time // when a pass's listing first saw the key unnamed
}

// NewSightings returns an empty memory on the clock now, which must be the
// scrubber's own and should be monotonic (time.Now is: only durations
// between its readings are used, which a stepped wall clock leaves alone).
func NewSightings(now func() time.Time) *Sightings {
	return &Sightings{now: now, first: make(map[string]time.Time)}
}

// Len is the number of orphans remembered.
func (s *Sightings) Len() int { return len(s.first) }

// orphanOldEnough is the scrub's age rule (the file's comment). sighted
// says whether an earlier pass saw the key unnamed, seenFor for how long on
// the scrubber's clock; storeAge is its age on the store's clock.
func orphanOldEnough(withSightings, sighted bool, seenFor, storeAge, grace time.Duration) bool {
	if withSightings {
		return sighted && seenFor >= grace
	}
	return storeAge >= grace
}

type partRef struct {
	topic [16]byte
	n     int32
}

// named collects what the heads name.
type named struct {
	keys     map[string]bool // every named key
	expected []Missing       // named keys that must exist
	unsafe   map[partRef]string
}

// Diff lists the whole bucket, then reads all of the cluster's heads with
// heads, and classifies every listed key (the order is what keeps an
// upload's object named: the file's comment). Objects below a head's clean
// offset (or below a pending clean target whose grace has run by cfg.Now:
// the machine may have deleted them and not yet recorded it) are not
// expected to exist; a named key the listing lacks is looked up once more
// before it is reported missing, since it may have been PUT after the
// listing.
func Diff(ctx context.Context, store objstore.Store, heads HeadsFunc, cfg DiffConfig) (DiffReport, error) {
	var listed []objstore.Info
	storeNow := cfg.StoreNow
	err := store.List(ctx, "", func(info objstore.Info) error {
		listed = append(listed, info)
		if cfg.StoreNow.IsZero() && info.Modified.After(storeNow) {
			storeNow = info.Modified
		}
		return nil
	})
	if err != nil {
		return DiffReport{}, fmt.Errorf("tier: diff: list the bucket: %w", err)
	}
	var listedAt time.Time
	if cfg.Seen != nil {
		listedAt = cfg.Seen.now()
	}
	hs, err := heads(ctx)
	if err != nil {
		return DiffReport{}, fmt.Errorf("tier: diff: read the heads: %w", err)
	}
	nm := named{keys: make(map[string]bool), unsafe: make(map[partRef]string)}
	for _, h := range hs {
		if err := nm.addHead(ctx, store, h, cfg.Now); err != nil {
			return DiffReport{}, err
		}
	}
	rep := DiffReport{Heads: len(hs), Listed: len(listed), StoreNow: storeNow}
	present := make(map[string]bool)
	for _, info := range listed {
		k, ok := ParseKey(info.Key)
		switch {
		case !ok:
			rep.Foreign = append(rep.Foreign, info)
		case nm.keys[info.Key]:
			rep.Referenced++
			present[info.Key] = true
		default:
			o := Orphan{Info: info, KeyInfo: k, Age: storeNow.Sub(info.Modified)}
			sighted := false
			if cfg.Seen != nil {
				var first time.Time
				if first, sighted = cfg.Seen.first[info.Key]; sighted {
					o.SeenFor = listedAt.Sub(first)
				} else {
					cfg.Seen.first[info.Key] = listedAt
				}
			}
			o.Held = nm.unsafe[partRef{k.TopicID, k.Partition}]
			o.Removable = orphanOldEnough(cfg.Seen != nil, sighted, o.SeenFor, o.Age, cfg.Grace) && o.Held == ""
			rep.Orphans = append(rep.Orphans, o)
		}
	}
	if cfg.Seen != nil {
		// Forget what is no longer an orphan (deleted, or named after all):
		// the memory stays as small as the orphans.
		orphan := make(map[string]bool, len(rep.Orphans))
		for _, o := range rep.Orphans {
			orphan[o.Key] = true
		}
		for k := range cfg.Seen.first {
			if !orphan[k] {
				delete(cfg.Seen.first, k)
			}
		}
	}
	for _, m := range nm.expected {
		if present[m.Key] {
			continue
		}
		switch _, err := store.Head(ctx, m.Key); {
		case err == nil:
			// PUT after the listing, named by the time the heads were read.
		case errors.Is(err, objstore.ErrNotFound):
			rep.Missing = append(rep.Missing, m)
		default:
			return DiffReport{}, fmt.Errorf("tier: diff: look up %s, named but not listed: %w", m.Key, err)
		}
	}
	sort.Slice(rep.Missing, func(i, j int) bool { return rep.Missing[i].Key < rep.Missing[j].Key })
	return rep, nil
}

// addHead records what h names: its intents, manifests, and the objects of
// both.
func (nm *named) addHead(ctx context.Context, store objstore.Store, h meta.RemoteHead, now time.Time) error {
	clean := h.Clean
	if h.PendingClean > clean && now.UnixMilli() >= h.PendingCleanMs {
		clean = h.PendingClean
	}
	part := partRef{h.TopicID, h.Partition}
	for _, in := range h.Intents {
		nm.keys[in.Key] = true // its object may or may not exist
	}
	expect := func(m Missing) {
		nm.keys[m.Key] = true
		if m.Next > clean {
			m.TopicID, m.Partition = h.TopicID, h.Partition
			nm.expected = append(nm.expected, m)
		}
	}
	for _, o := range h.Objects {
		expect(Missing{Key: o.Key, Base: o.Base, Next: o.Next, NamedBy: "head"})
	}
	var walk func(refs []meta.ManifestRef, namedBy string, depth int) error
	walk = func(refs []meta.ManifestRef, namedBy string, depth int) error {
		for _, ref := range refs {
			expect(Missing{Key: ref.Key, Base: ref.Base, Next: ref.Next, Manifest: true, NamedBy: namedBy})
			objs, children, err := ReadManifest(ctx, store, ref)
			switch {
			case errors.Is(err, objstore.ErrNotFound):
				// Reported as missing when it should exist; either way
				// what it listed is unknown, so none of the partition's
				// orphans may go.
				if ref.Next > clean {
					nm.unsafe[part] = "a manifest of its partition is missing"
				}
				continue
			case err != nil:
				return fmt.Errorf("tier: diff: %w", err)
			case depth >= maxManifestLevel:
				return fmt.Errorf("tier: diff: manifest %s nested deeper than %d levels: %w", ref.Key, maxManifestLevel, ErrCorrupt)
			}
			for _, o := range objs {
				expect(Missing{Key: o.Key, Base: o.Base, Next: o.Next, NamedBy: ref.Key})
			}
			if err := walk(children, ref.Key, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(h.Manifests, "head", 0)
}

// Limiter paces deletions: Wait returns when the next one may run.
type Limiter interface {
	Wait(ctx context.Context) error
}

// Scrub deletes the removable orphans of rep, one per lim.Wait, and returns
// how many it deleted. It stops at the first failure.
func Scrub(ctx context.Context, store objstore.Store, rep DiffReport, lim Limiter) (int, error) {
	if lim == nil {
		return 0, errors.New("tier: scrub: no rate limiter")
	}
	n := 0
	for _, o := range rep.Orphans {
		if !o.Removable {
			continue
		}
		if err := lim.Wait(ctx); err != nil {
			return n, fmt.Errorf("tier: scrub: %w", err)
		}
		if err := store.Delete(ctx, o.Key); err != nil {
			return n, fmt.Errorf("tier: scrub: delete orphan %s: %w", o.Key, err)
		}
		n++
	}
	return n, nil
}

// TokenBucket is a Limiter that allows perSecond waits a second on average,
// in bursts of up to burst.
type TokenBucket struct {
	rate  float64
	burst float64
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu     sync.Mutex
	tokens float64   // guarded by mu; below 0 while waits are reserved
	last   time.Time // guarded by mu; when tokens was last refilled
}

// NewTokenBucket returns a full bucket on the wall clock. perSecond must be
// above 0; burst below 1 counts as 1.
func NewTokenBucket(perSecond float64, burst int) *TokenBucket {
	return newTokenBucket(perSecond, burst, time.Now, sleepCtx)
}

func newTokenBucket(perSecond float64, burst int, now func() time.Time, sleep func(context.Context, time.Duration) error) *TokenBucket {
	b := float64(max(burst, 1))
	return &TokenBucket{rate: perSecond, burst: b, now: now, sleep: sleep, tokens: b, last: now()}
}

// Wait takes a token, waiting for it when the bucket is empty. A wait that
// is cancelled keeps its token spent.
func (b *TokenBucket) Wait(ctx context.Context) error {
	if b.rate <= 0 {
		return fmt.Errorf("tier: token bucket rate %v", b.rate)
	}
	b.mu.Lock()
	now := b.now()
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	b.tokens--
	short := -b.tokens
	b.mu.Unlock()
	if short <= 0 {
		return ctx.Err()
	}
	return b.sleep(ctx, time.Duration(short/b.rate*float64(time.Second)))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
