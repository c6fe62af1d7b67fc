package tier

// upload.go owns the upload of a partition's committed data: deciding when
// (bytes waiting or age), building one object from the local log, and the
// three steps that make it part of the remote log: record an intent in the
// head, PUT the object, commit it to the head.
//
// Invariant: an object covers [head.RemoteEnd, next) exactly, cut at batch
// boundaries and wholly below the high watermark, so uploads never leave a
// gap or an overlap, whoever the leader is.
// Invariant: every head write is fenced by the leader's partition state; a
// deposed leader's object is named only by an intent, which the next leader
// resolves by deleting it. A committed object is never deleted here.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/object"
	"github.com/sluice-mq/sluice/wal"
)

// uploadReadBytes is how much one log read takes while building an object.
const uploadReadBytes = 1 << 20

// maxUploadsPerPass bounds the objects one partition uploads in one
// maintenance pass, so a backlog drains at object-store speed while other
// partitions still get their turn.
const maxUploadsPerPass = 16

// maybeUpload uploads objects while enough data waits (or the oldest
// waiting byte waited long enough), resolving intents left by an earlier
// attempt first.
func (m *Manager) maybeUpload(ctx context.Context, t Target) error {
	id, n := t.P.TopicID(), t.P.Index()
	h, err := m.cachedHead(ctx, id, n)
	if err != nil {
		return err
	}
	if len(h.Intents) > 0 {
		if h, err = m.resolveIntents(ctx, h, *t.Fence); err != nil {
			return err
		}
	}
	for range maxUploadsPerPass {
		uploaded, err := m.uploadNext(ctx, t, h)
		if err != nil || !uploaded || ctx.Err() != nil {
			return err
		}
		if h, err = m.cachedHead(ctx, id, n); err != nil {
			return err
		}
	}
	return nil
}

// uploadNext uploads the next object of t's partition from head h's remote
// end if it is due, and reports whether it did.
func (m *Manager) uploadNext(ctx context.Context, t Target, h meta.RemoteHead) (bool, error) {
	id, n := t.P.TopicID(), t.P.Index()
	hw, _ := t.P.HighWatermark()
	log := t.P.Log()
	from := wal.Offset(h.RemoteEnd)
	if local := log.StartOffset(); from < local {
		// Total retention deleted data before it was uploaded (or nothing
		// was ever tiered): the remote log continues at the local start,
		// and everything below it is past retention.
		if h.Revision != 0 {
			next := h
			next.RemoteEnd, next.LogStart = int64(local), int64(local)
			var err error
			if h, err = m.putHead(ctx, next, *t.Fence); err != nil {
				return false, err
			}
			m.log.Info().Int32("partition", n).Int64("from", int64(from)).Int64("to", int64(local)).Msg("retention passed offsets before they were uploaded; the remote log continues at the local start")
		}
		from = local
	}
	now := m.cfg.Now()
	m.mu.Lock()
	s := m.state(id, n)
	if hw <= from {
		s.waiting = time.Time{} // nothing waits: the clock starts with the next record seen
		m.mu.Unlock()
		return false, nil
	}
	if s.waiting.IsZero() {
		s.waiting = now
	}
	since := s.waiting
	m.mu.Unlock()
	waitingBytes, err := log.BytesFrom(from)
	if err != nil {
		return false, fmt.Errorf("tier: bytes waiting from %d: %w", from, err)
	}
	if waitingBytes < t.UploadBytes && now.Sub(since) < t.UploadMaxDelay {
		return false, nil
	}
	select {
	case m.sem <- struct{}{}:
		defer func() { <-m.sem }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	if err := m.uploadOne(ctx, t, h, from, hw); err != nil {
		m.stats.uploadErrors.Add(1)
		return false, err
	}
	m.mu.Lock()
	s.waiting = now // what is left began to wait no later than now
	m.mu.Unlock()
	return true, nil
}

// uploadOne builds the object [from, cut) with cut <= hw and makes it part
// of the remote log.
func (m *Manager) uploadOne(ctx context.Context, t Target, h meta.RemoteHead, from, hw wal.Offset) error {
	id, n := t.P.TopicID(), t.P.Index()
	log := t.P.Log()
	b, err := object.NewBuilder(object.BuilderConfig{TopicID: id, Partition: n, TargetChunkBytes: m.cfg.ChunkBytes})
	if err != nil {
		return err
	}
	limit := max(t.UploadBytes, 1)
	for next := from; next < hw && int64(b.Len()) < limit; {
		data, err := log.Read(next, hw, uploadReadBytes)
		if err != nil {
			return fmt.Errorf("tier: read %d for upload: %w", next, err)
		}
		if len(data) == 0 {
			break
		}
		if err := object.Batches(data, func(batch []byte) error {
			if int64(b.Len()) >= limit {
				return nil
			}
			hdr, err := wal.ParseBatchHeader(batch)
			if err != nil {
				return err
			}
			if hdr.LastOffset() >= hw {
				return nil // a batch must be wholly committed
			}
			return b.Add(batch)
		}); err != nil {
			return fmt.Errorf("tier: build object from %d: %w", from, err)
		}
		if b.NextOffset() == next {
			break
		}
		next = b.NextOffset()
	}
	if b.Len() == 0 {
		return nil
	}
	snap, err := t.P.ProducerSnapshot()
	if err != nil {
		return fmt.Errorf("tier: producer snapshot: %w", err)
	}
	body, footer, err := b.Finish(log.Epochs(), snap)
	if err != nil {
		return fmt.Errorf("tier: finish object from %d: %w", from, err)
	}
	fence := *t.Fence
	key := objectKey(id, n, from, wal.Epoch(fence.LeaderEpoch))
	now := m.cfg.Now().UnixMilli()

	// 1. The intent: a crash from here on leaves a name the next leader
	// resolves, never an unnamed object.
	withIntent := h
	withIntent.Intents = append(slices.Clone(h.Intents), meta.RemoteIntent{Key: key, Base: int64(from), Epoch: fence.LeaderEpoch, CreatedMs: now})
	if h.RemoteEnd < int64(from) { // the first upload of a log that begins above 0
		withIntent.RemoteEnd, withIntent.LogStart, withIntent.Clean = int64(from), int64(from), int64(from)
	}
	h, err = m.putHead(ctx, withIntent, fence)
	if err != nil {
		return err
	}
	// 2. The PUT, under a deadline.
	putCtx, cancel := context.WithTimeout(ctx, m.cfg.PutTimeout)
	err = m.cfg.Store.Put(putCtx, key, body)
	cancel()
	if err != nil {
		return fmt.Errorf("tier: put %s: %w", key, err)
	}
	m.stats.objectsUploaded.Add(1)
	m.stats.bytesUploaded.Add(int64(len(body)))
	// 3. The commit.
	obj := meta.RemoteObject{Key: key, Base: int64(from), Next: int64(footer.NextOffset), Size: int64(len(body)),
		MaxTs: footer.MaxTimestamp(), Epoch: fence.LeaderEpoch, CreatedMs: now}
	committed := h
	committed.Intents = slices.DeleteFunc(slices.Clone(h.Intents), func(in meta.RemoteIntent) bool { return in.Key == key })
	committed.Objects = append(slices.Clone(h.Objects), obj)
	committed.RemoteEnd = obj.Next
	committed.Epochs = mergeEpochs(h.Epochs, footer.Epochs())
	committed, err = m.spill(ctx, committed)
	if err != nil {
		return err
	}
	if _, err := m.putHead(ctx, committed, fence); err != nil {
		return err
	}
	m.log.Debug().Str("key", key).Int64("base", obj.Base).Int64("next", obj.Next).Int64("bytes", obj.Size).Msg("uploaded")
	return nil
}

// putHead writes h fenced by fence and caches the result; on a conflict it
// drops the cached head so the next step reads it again.
func (m *Manager) putHead(ctx context.Context, h meta.RemoteHead, fence meta.PartitionState) (meta.RemoteHead, error) {
	out, err := m.cfg.Index.PutRemoteHead(ctx, h, fence)
	if err != nil {
		m.mu.Lock()
		m.state(h.TopicID, h.Partition).head = nil
		m.mu.Unlock()
		if errors.Is(err, meta.ErrFenced) {
			return meta.RemoteHead{}, fmt.Errorf("%w: %w", ErrNotLeader, err)
		}
		return meta.RemoteHead{}, err
	}
	m.setHead(out)
	return out, nil
}

// resolveIntents drops the intents of uploads that never committed (a
// crash or a deposed leader between PUT and commit) and deletes their
// objects.
//
// The head is written first, the objects deleted after. A commit whose
// answer was lost (an etcd timeout while the transaction was still in
// flight) may yet land, conditioned on the very head revision h was read
// at; deleting first would let it name an object already gone (the chaos
// suite's all-crash found exactly that). Once the head without the intents
// is written, such a commit can no longer land; if it landed before, the
// write conflicts and nothing is deleted. A crash between the two steps
// leaves orphans, which the scrub removes after the grace period.
func (m *Manager) resolveIntents(ctx context.Context, h meta.RemoteHead, fence meta.PartitionState) (meta.RemoteHead, error) {
	intents := h.Intents
	h.Intents = nil
	out, err := m.putHead(ctx, h, fence)
	if err != nil {
		return out, err
	}
	for _, in := range intents {
		if err := m.cfg.Store.Delete(ctx, in.Key); err != nil {
			// An orphan now: the scrub removes it.
			m.log.Warn().Err(err).Str("key", in.Key).Msg("delete the object of an upload that never committed; left to the scrub")
			continue
		}
		m.log.Info().Str("key", in.Key).Int64("base", in.Base).Msg("deleted the object of an upload that never committed")
	}
	return out, nil
}

// mergeEpochs appends to chain the entries of add that start a new epoch.
func mergeEpochs(chain []meta.RemoteEpoch, add []wal.EpochEntry) []meta.RemoteEpoch {
	out := slices.Clone(chain)
	for _, e := range add {
		if len(out) > 0 && out[len(out)-1].Epoch >= int32(e.Epoch) {
			continue
		}
		out = append(out, meta.RemoteEpoch{Epoch: int32(e.Epoch), Start: int64(e.StartOffset)})
	}
	return out
}

// spill moves the oldest half of a head's objects into a new manifest once
// the head holds more than MaxObjectsInHead, so the head stays small.
func (m *Manager) spill(ctx context.Context, h meta.RemoteHead) (meta.RemoteHead, error) {
	if len(h.Objects) <= m.cfg.MaxObjectsInHead {
		return h, nil
	}
	moved := h.Objects[:len(h.Objects)/2]
	body, err := encodeManifest(moved)
	if err != nil {
		return h, err
	}
	key := manifestKey(h.TopicID, h.Partition, wal.Offset(moved[0].Base))
	putCtx, cancel := context.WithTimeout(ctx, m.cfg.PutTimeout)
	defer cancel()
	if err := m.cfg.Store.Put(putCtx, key, body); err != nil {
		return h, fmt.Errorf("tier: put manifest %s: %w", key, err)
	}
	ref := meta.ManifestRef{Key: key, Base: moved[0].Base, Next: moved[len(moved)-1].Next, Objects: len(moved)}
	for _, o := range moved {
		ref.MaxTs = max(ref.MaxTs, o.MaxTs)
	}
	h.Manifests = append(slices.Clone(h.Manifests), ref)
	h.Objects = slices.Clone(h.Objects[len(moved):])
	return m.mergeManifests(ctx, h, m.cfg.MaxManifestsInHead)
}
