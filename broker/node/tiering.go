package node

// tiering.go wires tier/ into the broker: it opens the object store (and
// starts its probe, tiering_probe.go) and the read cache, runs the tiering manager on the maintenance ticks (uploads on
// the partitions this broker leads, the retention state machine on every
// partition it hosts), and answers the questions the Kafka and HTTP handlers
// ask of the remote log: where the log starts, and the records below the
// local log start.
//
// Invariant: the retention state machine is the only code that deletes a
// partition's data (the wal only rolls segments, walConfig); an upload is
// fenced by the partition state this broker leads it at.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/cache"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
	objopen "github.com/sluice-mq/sluice/tier/objstore/open"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// objectStoreURL is the configured store, by default a directory in the
// data dir.
func (b *Node) objectStoreURL() (string, error) {
	if b.Cfg.ObjectStore != "" {
		return b.Cfg.ObjectStore, nil
	}
	abs, err := filepath.Abs(filepath.Join(b.Cfg.DataDir, "objects"))
	if err != nil {
		return "", fmt.Errorf("broker: object store directory: %w", err)
	}
	return "file://" + abs, nil
}

// startTiering opens the object store, the read cache and the manager.
func (b *Node) StartTiering(ctx context.Context) error {
	url, err := b.objectStoreURL()
	if err != nil {
		return err
	}
	store := b.Cfg.Objects
	if store == nil {
		opts := b.Cfg.ObjectStoreOptions
		opts.Logger = b.NodeLog // each store names its own component
		if store, err = objopen.URL(ctx, url, opts); err != nil {
			return fmt.Errorf("broker: object store %s: %w", url, err)
		}
	}
	c, err := cache.New(cache.Config{MaxBytes: b.Cfg.ReadCacheBytes,
		MaxConcurrentFills: cache.DefaultMaxConcurrentFills, FillGate: b.backfillGate})
	if err != nil {
		return fmt.Errorf("broker: read cache: %w", err)
	}
	m, err := tier.New(tier.Config{Store: store, Index: b.Store, Cache: c, Now: b.now,
		Logger: b.NodeLog, ChunkBytes: b.Cfg.TierChunkBytes, Refs: b.Store}) // Refs: the ledger of large payloads
	if err != nil {
		c.Close()
		return err
	}
	b.Objects, b.Rcache, b.Tiers = store, c, m
	// "tiering ready" is logged once the store passed its probe
	// (tiering_probe.go); until then the broker is not ready.
	b.startStoreProbe(store, url)
	return nil
}

// stopTiering waits for the manager's work (its context is already
// cancelled) and closes the cache.
func (b *Node) StopTiering() {
	b.stopStoreProbe()
	if b.Tiers != nil {
		b.Tiers.Wait()
	}
	if b.Rcache != nil {
		b.Rcache.Close()
	}
}

// Now is the broker's clock (Config.Now, or the wall clock): of tiering,
// retention, and the partitions' deadlines.
func (b *Node) Now() time.Time { return b.now() }

func (b *Node) now() time.Time {
	if b.Cfg.Now != nil {
		return b.Cfg.Now()
	}
	return time.Now()
}

// tierTargets lists the partitions this broker hosts with their policies,
// and the fence of those it leads.
func (b *Node) TierTargets() []tier.Target {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []tier.Target
	for _, t := range b.topics {
		pol := t.Settings.Policy(b.Cfg.TierGrace)
		for i, p := range t.Partitions {
			if p == nil {
				continue
			}
			tg := tier.Target{P: p, Policy: pol, UploadBytes: t.Settings.UploadBytes,
				UploadMaxDelay: millis(t.Settings.UploadMaxDelayMs)}
			if i < len(t.States) {
				if st := t.States[i]; st.Leader == b.Cfg.NodeID && int32(p.LeaderEpoch()) == st.LeaderEpoch && st.Revision > 0 {
					fence := st
					tg.Fence = &fence
				}
			}
			out = append(out, tg)
		}
	}
	return out
}

// remoteRange is the partition's tiered range, empty if nothing is tiered
// or the head cannot be read (then the local log is all there is to serve).
func (b *Node) RemoteRange(ctx context.Context, p *partition.Partition) tier.Range {
	if b.Tiers == nil {
		return tier.Range{}
	}
	r, err := b.Tiers.Range(ctx, p.TopicID(), p.Index())
	if err != nil {
		ReaderLevel(b.Logger, err).Err(err).Str("topic", p.Topic()).Int32("partition", p.Index()).Msg("read remote index head")
		return tier.Range{}
	}
	return r
}

// logStart is the partition's log start offset as clients see it: the
// remote log start when anything is tiered below the local log.
func (b *Node) LogStart(ctx context.Context, p *partition.Partition) wal.Offset {
	local := p.Log().StartOffset()
	if r := b.RemoteRange(ctx, p); !r.Empty() && r.LogStart < local && r.RemoteEnd >= local {
		return r.LogStart
	}
	return local
}

// readRemote reads batches from object storage at from, which is below the
// local log start.
func (b *Node) ReadRemote(ctx context.Context, p *partition.Partition, from wal.Offset, maxBytes int) ([]byte, error) {
	data, err := b.Tiers.Read(ctx, p.TopicID(), p.Index(), from, maxBytes)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, tier.ErrOffsetOutOfRange):
		return nil, fmt.Errorf("%w: %w", wal.ErrOffsetOutOfRange, err)
	}
	ReaderLevel(b.Logger, err).Err(err).Str("topic", p.Topic()).Int32("partition", p.Index()).Int64("offset", int64(from)).Msg("remote read failed")
	return nil, fmt.Errorf("%w: %w", ErrRemoteRead, err)
}

// ReaderLevel is the level of a failed read for a client: debug when the
// client gave up (its request's context was cancelled: a consumer that
// ends its long poll, a closed connection), which is not the operator's
// concern; a warning otherwise.
func ReaderLevel(logger zerolog.Logger, err error) *zerolog.Event {
	if errors.Is(err, context.Canceled) {
		return logger.Debug()
	}
	return logger.Warn()
}

// position is Partition.Position over the whole log, local and remote:
// an offset below the local log start but in the remote range is readable.
func (b *Node) Position(ctx context.Context, p *partition.Partition, from wal.Offset) (wal.Offset, <-chan struct{}, error) {
	hw, wait, err := p.Position(from)
	if errors.Is(err, wal.ErrOffsetOutOfRange) && from < p.Log().StartOffset() && from >= b.LogStart(ctx, p) {
		return hw, nil, nil
	}
	return hw, wait, err
}

// read is Partition.Read over the whole log: below the local log start it
// reads object storage.
func (b *Node) Read(ctx context.Context, p *partition.Partition, from wal.Offset, maxBytes int) ([]byte, wal.Offset, error) {
	if from < p.Log().StartOffset() && from >= b.LogStart(ctx, p) {
		hw, _ := p.HighWatermark()
		data, err := b.ReadRemote(ctx, p, from, maxBytes)
		return data, hw, err
	}
	return p.Read(from, maxBytes)
}

// alignWithRemote makes a local log that ends below the remote end (lost,
// removed, or a new replica) continue at the remote end: everything below
// it is committed and in object storage, and new records must not reuse its
// offsets. A local tail below the remote end is dropped (it is uploaded).
func (b *Node) alignWithRemote(tp *Topic, i int32, l *wal.Log) error {
	if b.Tiers == nil || !tp.Settings.Tiered {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, epochs, err := b.Tiers.FreshRange(ctx, tp.Meta.ID, i)
	if err != nil {
		return fmt.Errorf("broker: remote index of %s-%d: %w", tp.Meta.Name, i, err)
	}
	if r.RemoteEnd <= l.EndOffset() {
		return nil
	}
	last := wal.EpochEntry{Epoch: -1}
	if n := len(epochs); n > 0 {
		last = epochs[n-1]
	}
	// Everything local goes, also bytes below a log start inside the first
	// segment (a follower adopts its leader's log start).
	if err := l.TruncateFullyAndStartAt(r.RemoteEnd, last); err != nil {
		return fmt.Errorf("broker: restart %s-%d at the remote end %d: %w", tp.Meta.Name, i, r.RemoteEnd, err)
	}
	// The producer state comes from the last object: idempotent producers
	// keep their deduplication window across the loss of the local log.
	snap, at, err := b.Tiers.LastSnapshot(ctx, tp.Meta.ID, i)
	switch {
	case err != nil:
		b.Logger.Warn().Err(err).Str("topic", tp.Meta.Name).Int32("partition", i).Msg("read the last object's producer snapshot; producer state starts empty")
	case snap != nil && at == r.RemoteEnd:
		data, err := partition.SnapshotAt(snap, at)
		if err == nil {
			err = vfs.WriteFileDurable(b.FS, b.snapshotPath(tp.Meta.ID, i), data)
		}
		if err != nil {
			return fmt.Errorf("broker: install the producer snapshot of %s-%d: %w", tp.Meta.Name, i, err)
		}
	}
	b.Logger.Warn().Str("topic", tp.Meta.Name).Int32("partition", i).Int64("remote_end", int64(r.RemoteEnd)).
		Msg("the local log ended below the remote end; it continues there, older records are read from object storage")
	return nil
}

// scrubLoop removes orphans (objects no head, manifest or intent names,
// seen unnamed for the grace period) on the controller, every
// ScrubInterval, at a bounded rate: the same classification tierctl diff
// shows.
func (b *Node) ScrubLoop(ctx context.Context) {
	if b.Tiers == nil || b.Cfg.ScrubInterval <= 0 {
		return
	}
	t := time.NewTicker(b.Cfg.ScrubInterval)
	defer t.Stop()
	lim := tier.NewTokenBucket(scrubDeletesPerSecond, 1)
	// The wall clock's monotonic readings, not b.now(): how long an orphan
	// has been seen unnamed must not move when the clock of retention is
	// stepped or shifted (tier/scrub.go).
	seen := tier.NewSightings(time.Now)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if b.Hooks.ControllerID() != b.Cfg.NodeID {
			continue
		}
		b.scrubOnce(ctx, seen, lim)
	}
}

// scrubOnce is one pass of the scrub: Diff lists the bucket before it reads
// the heads (tier/scrub.go says why), then the topics deleted while a
// broker was down are swept and the removable orphans deleted.
func (b *Node) scrubOnce(ctx context.Context, seen *tier.Sightings, lim tier.Limiter) {
	var heads []meta.RemoteHead
	readHeads := func(ctx context.Context) ([]meta.RemoteHead, error) {
		var err error
		heads, err = b.Store.RemoteHeads(ctx)
		return heads, err
	}
	rep, err := tier.Diff(ctx, b.Objects, readHeads, tier.DiffConfig{Grace: b.Cfg.TierGrace, Now: b.now(), Seen: seen})
	if err != nil {
		b.Logger.Warn().Err(err).Msg("orphan scrub")
		return
	}
	b.sweepDeletedTopics(ctx, heads)
	n, err := tier.Scrub(ctx, b.Objects, rep, lim)
	if err != nil && ctx.Err() == nil {
		b.Logger.Warn().Err(err).Msg("orphan scrub")
	}
	b.M.orphansRemoved.Add(float64(n))
	b.M.orphans.Set(float64(len(rep.Orphans) - n))
	if n > 0 || len(rep.Missing) > 0 {
		b.Logger.Info().Int("orphans_removed", n).Int("orphans_left", len(rep.Orphans)-n).Int("missing", len(rep.Missing)).Msg("orphan scrub")
	}
}

// scrubDeletesPerSecond bounds the scrub's deletions.
const scrubDeletesPerSecond = 20

// deleteRemoteRecords moves the remote log start to offset (-1: the high
// watermark) for DeleteRecords, on the partition's leader.
func (b *Node) DeleteRemoteRecords(ctx context.Context, p *partition.Partition, offset int64) error {
	if b.Tiers == nil || b.RemoteRange(ctx, p).Empty() {
		return nil
	}
	to := wal.Offset(offset)
	if offset < 0 {
		to, _ = p.HighWatermark()
	}
	for _, tg := range b.TierTargets() {
		if tg.P == p && tg.Fence != nil {
			if err := b.Tiers.AdvanceLogStart(ctx, *tg.Fence, to); err != nil {
				return fmt.Errorf("%w: move the remote log start to %d: %w", ErrStorage, to, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: %s-%d", ErrNotLeader, p.Topic(), p.Index())
}

// restartBehindLeader reopens a follower replica whose end is below its
// leader's local log start (it was away longer than the leader's local
// retention): the replica is closed and opened again, and opening a log
// that ends below the remote end restarts it there (alignWithRemote), from
// where the leader's local tail is copied. Everything older stays in object
// storage. At most one restart of a partition runs at a time.
func (b *Node) RestartBehindLeader(p *partition.Partition, leaderStart wal.Offset) {
	if b.Tiers == nil || p.Log().EndOffset() >= leaderStart {
		return
	}
	b.reopenReplica(p, leaderStart, "at the remote end", func() error { p.StopAndClose(); return nil })
}

// ErrRemoteRead marks a failed read of object storage: retriable for the
// client (KAFKA_STORAGE_ERROR), never an empty or shifted answer.
var ErrRemoteRead = errors.New("object storage read failed")

// deleteTopicObjects removes a deleted topic's objects and heads through the
// retention machine, in the background; a crash leaves the heads, which
// sweepDeletedTopics finishes.
func (b *Node) deleteTopicObjects(id [16]byte, partitions int32) {
	if b.Tiers == nil {
		return
	}
	b.PartWG.Add(1)
	go func() {
		defer b.PartWG.Done()
		ctx, cancel := context.WithTimeout(b.PartCtx, 10*time.Minute)
		defer cancel()
		if err := b.Tiers.DeleteTopic(ctx, id, partitions); err != nil {
			b.Logger.Warn().Err(err).Msg("delete a deleted topic's objects; retried by the next sweep")
		}
	}()
}

// sweepDeletedTopics finishes the object deletion of topics deleted while
// a broker was down (DeleteTopics deletes at once otherwise): heads whose
// topic no longer exists. The controller's scrub loop runs it, with the
// heads it read anyway.
func (b *Node) sweepDeletedTopics(ctx context.Context, heads []meta.RemoteHead) {
	parts := map[[16]byte]int32{}
	for _, h := range heads {
		parts[h.TopicID] = max(parts[h.TopicID], h.Partition+1)
	}
	for id, n := range parts {
		if b.LookupTopicID(id) != nil {
			continue
		}
		if sts, err := b.Store.Partitions(ctx, id); err != nil || len(sts) > 0 {
			continue // unknown, or created elsewhere and not seen here yet
		}
		if err := b.Tiers.DeleteTopic(ctx, id, n); err != nil {
			b.Logger.Warn().Err(err).Msg("sweep a deleted topic's objects")
		}
	}
}
