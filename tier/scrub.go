package tier

// scrub.go owns the orphan scrub (DESIGN.md §5) that the broker and
// `tierctl diff` share: Diff compares the bucket with what the heads in etcd
// name, and Scrub deletes the orphans Diff found old enough, at a bounded
// rate.
//
// An orphan is an object or manifest of ours (ParseKey) that no head, no
// manifest and no intent names: a PUT whose head write lost (a deposed
// leader, a crash between PUT and intent resolution that nobody resolved),
// or a manifest spilled by a head write that failed. Such keys are never
// named again (keys.go: every key is fresh), so deleting them is safe once
// they are older than the grace period, which covers the window between a
// PUT and the head write that names it (a manifest is PUT before its head;
// an upload's head write follows its PUT) and heads read a little before the
// bucket was listed.
//
// Invariant: Scrub deletes only keys Diff classified as removable orphans:
// keys we wrote (never a foreign key), named by nothing in the heads given,
// older than the grace, and not of a partition one of whose manifests is
// missing or unreadable (its objects would look unnamed).
// Invariant: Diff fails rather than classify with a partial view: a head
// list or a manifest it cannot read is an error, not an empty set.
//
// TokenBucket.mu guards its tokens and last refill; the rest is immutable.

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
	Age time.Duration // at the time Diff was given
	// Removable: older than the grace period, and Held is empty.
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

// Diff lists the whole bucket and classifies every key against heads (all of
// the cluster's heads, read shortly before: meta.Store.RemoteHeads). now and
// grace decide which orphans are removable. Objects below a head's clean
// offset (or below a pending clean target whose grace has run: the machine
// may have deleted them and not yet recorded it) are not expected to exist.
func Diff(ctx context.Context, store objstore.Store, heads []meta.RemoteHead, now time.Time, grace time.Duration) (DiffReport, error) {
	nm := named{keys: make(map[string]bool), unsafe: make(map[partRef]string)}
	for _, h := range heads {
		if err := nm.addHead(ctx, store, h, now); err != nil {
			return DiffReport{}, err
		}
	}
	rep := DiffReport{Heads: len(heads)}
	present := make(map[string]bool)
	err := store.List(ctx, "", func(info objstore.Info) error {
		rep.Listed++
		k, ok := ParseKey(info.Key)
		switch {
		case !ok:
			rep.Foreign = append(rep.Foreign, info)
		case nm.keys[info.Key]:
			rep.Referenced++
			present[info.Key] = true
		default:
			o := Orphan{Info: info, KeyInfo: k, Age: now.Sub(info.Modified)}
			o.Held = nm.unsafe[partRef{k.TopicID, k.Partition}]
			o.Removable = o.Age >= grace && o.Held == ""
			rep.Orphans = append(rep.Orphans, o)
		}
		return nil
	})
	if err != nil {
		return DiffReport{}, fmt.Errorf("tier: diff: list the bucket: %w", err)
	}
	for _, m := range nm.expected {
		if !present[m.Key] {
			rep.Missing = append(rep.Missing, m)
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
