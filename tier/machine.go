package tier

// machine.go carries out the retention state machine's decisions
// (retention.go) for one partition: local segment deletion on every
// replica, and on the leader the remote log start, the grace period and the
// deletion of objects and manifests below the clean target. Every step is
// recorded in the head before or after the deletions it covers so that a
// crash anywhere is redone from the head: deleting a missing object counts
// as success.
//
// Invariant: objects are deleted only after the head records a pending
// clean target whose grace period has run, and the head drops them only
// after they are deleted; a manifest is deleted only once every object it
// lists is below the clean offset.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/wal"
)

// retain runs one retention step of t's partition.
func (m *Manager) retain(ctx context.Context, t Target) error {
	id, n := t.P.TopicID(), t.P.Index()
	var h meta.RemoteHead
	if t.Policy.Tiered {
		var err error
		if t.Fence != nil {
			h, err = m.cachedHead(ctx, id, n)
		} else {
			h, err = m.refreshHead(ctx, id, n) // a follower learns the remote end from etcd
		}
		if err != nil {
			return err
		}
	}
	log := t.P.Log()
	hw, _ := t.P.HighWatermark()
	logStart := log.StartOffset()
	if h.RemoteEnd > h.LogStart {
		logStart = wal.Offset(h.LogStart)
	}
	below := LocalDeleteBelow(t.Policy, LocalInput{Segments: log.Segments(), HW: hw, LogStart: logStart,
		RemoteEnd: wal.Offset(h.RemoteEnd), Pins: t.Pins, Now: m.cfg.Now()})
	if below > 0 {
		deleted, err := t.P.DeleteLocalBelow(below)
		m.stats.localDeleted.Add(int64(deleted))
		if err != nil {
			return fmt.Errorf("tier: delete local segments below %d: %w", below, err)
		}
	}
	// The ledger of large payloads folds at the lowest offset any reader
	// may still read: the remote log start, or the local one when the
	// local log still holds data below it (an unsealed segment), as the
	// broker's ListOffsets answers then; read at the start of this pass
	// (a move below counts from the next: later, never earlier).
	readable := log.StartOffset()
	if h.RemoteEnd > h.LogStart {
		readable = min(readable, wal.Offset(h.LogStart))
	}
	refErr := m.foldRefs(ctx, t, int64(readable), int64(log.EndOffset()))
	if !t.Policy.Tiered || t.Fence == nil || h.Revision == 0 {
		return refErr
	}
	return errors.Join(refErr, m.retainRemote(ctx, t, h))
}

// retainRemote moves the remote log start by total retention and advances
// the clean-up.
func (m *Manager) retainRemote(ctx context.Context, t Target, h meta.RemoteHead) error {
	now := m.cfg.Now()
	objs, err := m.objectsFrom(ctx, h, h.LogStart)
	if err != nil {
		return err
	}
	localAbove, err := t.P.Log().BytesFrom(max(t.P.Log().StartOffset(), wal.Offset(h.RemoteEnd)))
	if err != nil {
		localAbove = 0
	}
	start := RemoteLogStart(t.Policy, StartInput{Objects: objs, LogStart: wal.Offset(h.LogStart),
		RemoteEnd: wal.Offset(h.RemoteEnd), LocalBytesAbove: localAbove, Now: now})
	if int64(start) > h.LogStart {
		next := h
		next.LogStart = int64(start)
		if h, err = m.putHead(ctx, next, *t.Fence); err != nil {
			return err
		}
		m.log.Info().Int32("partition", h.Partition).Int64("log_start", h.LogStart).Msg("retention moved the log start")
	}
	below, err := m.objectsFrom(ctx, h, h.Clean)
	if err != nil {
		return err
	}
	step, ok := NextClean(t.Policy, CleanState{Clean: wal.Offset(h.Clean), Pending: wal.Offset(h.PendingClean),
		DueMs: h.PendingCleanMs, LogStart: wal.Offset(h.LogStart)}, below, t.Pins, now)
	if !ok {
		return nil
	}
	next := h
	if step.SetPending {
		next.PendingClean, next.PendingCleanMs = int64(step.Pending), step.DueMs
		_, err := m.putHead(ctx, next, *t.Fence)
		return err
	}
	for _, o := range step.Delete {
		if err := m.cfg.Store.Delete(ctx, o.Key); err != nil {
			return fmt.Errorf("tier: delete %s: %w", o.Key, err)
		}
		m.stats.objectsDeleted.Add(1)
	}
	clean := int64(step.CleanTo)
	var keep []meta.ManifestRef
	for _, ref := range h.Manifests {
		if ref.Next > clean {
			keep = append(keep, ref)
			continue
		}
		if err := m.deleteManifestTree(ctx, ref); err != nil {
			return err
		}
	}
	next.Manifests = keep
	next.Objects = slices.DeleteFunc(slices.Clone(h.Objects), func(o meta.RemoteObject) bool { return o.Next <= clean })
	next.Clean = clean
	if clean >= next.PendingClean {
		next.PendingClean, next.PendingCleanMs = 0, 0
	}
	if _, err := m.putHead(ctx, next, *t.Fence); err != nil {
		return err
	}
	if len(step.Delete) > 0 {
		m.log.Info().Int32("partition", h.Partition).Int("objects", len(step.Delete)).Int64("clean", clean).Msg("retention deleted objects")
	}
	return nil
}

// objectsFrom lists the committed objects that end above from, in offset
// order, reading the manifests that hold any; with limit > 0, at most limit
// of them (a read needs only the next few).
func (m *Manager) objectsFrom(ctx context.Context, h meta.RemoteHead, from int64, limit ...int) ([]RemoteObject, error) {
	most := 0
	if len(limit) > 0 {
		most = limit[0]
	}
	var out []RemoteObject
	full := func() bool { return most > 0 && len(out) >= most }
	add := func(o meta.RemoteObject) {
		if o.Next > from && !full() {
			out = append(out, RemoteObject{Key: o.Key, Base: wal.Offset(o.Base), Next: wal.Offset(o.Next), Size: o.Size, MaxTs: o.MaxTs})
		}
	}
	if _, err := walkManifests(ctx, h.Manifests, from, m.manifest, func(_ meta.ManifestRef, objs []meta.RemoteObject) (bool, error) {
		for _, o := range objs {
			add(o)
		}
		return full(), nil
	}); err != nil {
		return nil, err
	}
	for _, o := range h.Objects {
		add(o)
	}
	return out, nil
}

// manifest reads a manifest through the cache (manifests are immutable).
// Decoded manifests are kept (they never change) up to maxDecodedManifests;
// past it the set starts again, so memory stays bounded.
func (m *Manager) manifest(ctx context.Context, ref meta.ManifestRef) ([]meta.RemoteObject, []meta.ManifestRef, error) {
	m.mu.Lock()
	d, ok := m.manifests[ref.Key]
	m.mu.Unlock()
	if ok {
		return d.objs, d.refs, nil
	}
	b, err := m.cfg.Cache.Get(ctx, "manifest:"+ref.Key, func(ctx context.Context) ([]byte, error) {
		return m.cfg.Store.Get(ctx, ref.Key, 0, -1)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("tier: read manifest %s: %w", ref.Key, err)
	}
	if d.objs, d.refs, err = decodeManifest(ref.Key, b); err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	if len(m.manifests) >= maxDecodedManifests {
		m.manifests = make(map[string]decodedManifest)
	}
	m.manifests[ref.Key] = d
	m.mu.Unlock()
	return d.objs, d.refs, nil
}

// decodedManifest is a manifest's entries.
type decodedManifest struct {
	objs []meta.RemoteObject
	refs []meta.ManifestRef
}

// maxDecodedManifests bounds the manager's decoded manifests (each lists
// MaxObjectsInHead/2 objects, about 10 KiB).
const maxDecodedManifests = 4096

// DeleteTopic removes every object, manifest and uncommitted upload of a
// deleted topic's partitions and then their heads. It is redone from the
// heads after a crash.
func (m *Manager) DeleteTopic(ctx context.Context, topicID [16]byte, partitions int32) error {
	for n := range partitions {
		h, err := m.cfg.Index.RemoteHead(ctx, topicID, n)
		if err != nil {
			return err
		}
		if h.Revision == 0 {
			continue
		}
		objs, err := m.objectsFrom(ctx, h, -1)
		if err != nil {
			return err
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		for _, in := range h.Intents {
			keys = append(keys, in.Key)
		}
		if _, err := walkManifests(ctx, h.Manifests, -1, m.manifest, func(ref meta.ManifestRef, _ []meta.RemoteObject) (bool, error) {
			keys = append(keys, ref.Key)
			return false, nil
		}); err != nil {
			return err
		}
		for _, k := range keys {
			if err := m.cfg.Store.Delete(ctx, k); err != nil {
				return fmt.Errorf("tier: delete %s of a deleted topic: %w", k, err)
			}
			m.stats.objectsDeleted.Add(1)
		}
		if err := m.cfg.Index.DeleteRemoteHead(ctx, h); err != nil {
			return err
		}
		m.Forget(topicID, n)
	}
	return nil
}

// deleteManifestTree deletes a manifest wholly below the clean offset and
// every manifest under it, the lower ones first (a crash in between leaves
// the reference, and the next pass deletes the rest; a missing one is
// success). Their objects are gone already: they are below the clean offset.
func (m *Manager) deleteManifestTree(ctx context.Context, ref meta.ManifestRef) error {
	if ref.Level > 0 {
		_, children, err := m.manifest(ctx, ref)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			children = nil // deleted by an earlier pass that did not finish
		case err != nil:
			return err
		}
		for _, c := range children {
			if err := m.deleteManifestTree(ctx, c); err != nil {
				return err
			}
		}
	}
	if err := m.cfg.Store.Delete(ctx, ref.Key); err != nil {
		return fmt.Errorf("tier: delete manifest %s: %w", ref.Key, err)
	}
	return nil
}

// AdvanceLogStart moves the remote log start forward to to (capped at the
// remote end), as Kafka's DeleteRecords asks; the retention machine then
// deletes the objects below it after the grace period. fence is the
// partition state the caller leads the partition at.
func (m *Manager) AdvanceLogStart(ctx context.Context, fence meta.PartitionState, to wal.Offset) error {
	h, err := m.refreshHead(ctx, fence.TopicID, fence.Partition)
	if err != nil {
		return err
	}
	start := min(int64(to), h.RemoteEnd)
	if h.Revision == 0 || start <= h.LogStart {
		return nil
	}
	next := h
	next.LogStart = start
	_, err = m.putHead(ctx, next, fence)
	return err
}
