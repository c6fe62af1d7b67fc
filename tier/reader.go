package tier

// reader.go owns reads of tiered data: offset → object (head, then
// manifests) → chunk (the object's footer) → verified chunk bytes, all
// through the read cache, with read-ahead of the following chunks across
// object boundaries, and timestamp lookups through the footers.
//
// Invariant: a read returns whole batches starting with the one that holds
// the offset asked for, every byte from a chunk whose length and CRC-32C
// matched its footer entry; any failure is an error (ErrUnavailable or
// ErrCorrupt, both retriable for a client), never fewer or shifted records.
// Invariant: a failed fill is not cached (cache package), so a corrupt or
// truncated read is retried from the store next time.

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/object"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/wal"
)

// Range is what a partition's remote log holds: [LogStart, RemoteEnd).
type Range struct {
	LogStart, RemoteEnd wal.Offset
}

// Empty reports whether nothing is tiered.
func (r Range) Empty() bool { return r.RemoteEnd <= r.LogStart }

// Range returns the partition's remote range as this broker knows it.
func (m *Manager) Range(ctx context.Context, topicID [16]byte, n int32) (Range, error) {
	h, err := m.cachedHead(ctx, topicID, n)
	if err != nil {
		return Range{}, err
	}
	return Range{LogStart: wal.Offset(h.LogStart), RemoteEnd: wal.Offset(h.RemoteEnd)}, nil
}

// FreshRange is Range read from etcd now, not from the cache, with the
// remote log's leader-epoch chain.
func (m *Manager) FreshRange(ctx context.Context, topicID [16]byte, n int32) (Range, []wal.EpochEntry, error) {
	h, err := m.refreshHead(ctx, topicID, n)
	if err != nil {
		return Range{}, nil, err
	}
	return Range{LogStart: wal.Offset(h.LogStart), RemoteEnd: wal.Offset(h.RemoteEnd)}, remoteEpochs(h), nil
}

// RemoteEpochs is the remote log's leader-epoch chain, from the cached head
// (for the epoch of an offset below the local log).
func (m *Manager) RemoteEpochs(ctx context.Context, topicID [16]byte, n int32) ([]wal.EpochEntry, error) {
	h, err := m.cachedHead(ctx, topicID, n)
	if err != nil {
		return nil, err
	}
	return remoteEpochs(h), nil
}

func remoteEpochs(h meta.RemoteHead) []wal.EpochEntry {
	out := make([]wal.EpochEntry, 0, len(h.Epochs))
	for _, e := range h.Epochs {
		out = append(out, wal.EpochEntry{Epoch: wal.Epoch(e.Epoch), StartOffset: wal.Offset(e.Start)})
	}
	return out
}

// Read returns whole batches from the one holding from, up to maxBytes (at
// least one batch), read from object storage. from must be in the remote
// range; otherwise the error is ErrOffsetOutOfRange.
func (m *Manager) Read(ctx context.Context, topicID [16]byte, n int32, from wal.Offset, maxBytes int) ([]byte, error) {
	h, err := m.cachedHead(ctx, topicID, n)
	if err != nil {
		return nil, err
	}
	if int64(from) >= h.RemoteEnd || int64(from) < h.LogStart {
		// The cached head may be old (a follower's): look again once.
		if h, err = m.refreshHead(ctx, topicID, n); err != nil {
			return nil, err
		}
	}
	if int64(from) < h.LogStart || int64(from) >= h.RemoteEnd {
		return nil, fmt.Errorf("%w: %d outside the remote log [%d, %d)", ErrOffsetOutOfRange, from, h.LogStart, h.RemoteEnd)
	}
	objs, err := m.objectsFrom(ctx, h, int64(from), 2+m.cfg.ReadAhead)
	if err != nil {
		return nil, err
	}
	m.stats.remoteReads.Add(1)
	// Each chunk gives one run of whole batches, a slice of the cached
	// chunk; they are copied once, into a buffer of the exact size, at the
	// end (appending chunk by chunk grew and copied the response several
	// times: the largest part of a replay's CPU after the socket).
	var parts [][]byte
	size := 0
	next := from
	full := false
	for oi := 0; oi < len(objs) && !full; oi++ {
		o := objs[oi]
		f, err := m.footer(ctx, o)
		if err != nil {
			return nil, m.readFailed(err)
		}
		i, ok := f.ChunkFor(next)
		for ; ok && i < f.NumChunks() && !full; i++ {
			m.readAhead(o, f, i, objs[oi+1:])
			data, err := m.chunk(ctx, o, f, i)
			if err != nil {
				return nil, m.readFailed(err)
			}
			tail, err := object.SliceFrom(data, next)
			if err != nil {
				return nil, m.readFailed(fmt.Errorf("%w: %w", ErrCorrupt, err))
			}
			var run []byte
			run, next, full, err = takeBatches(tail, next, size, maxBytes)
			if err != nil {
				return nil, m.readFailed(fmt.Errorf("%w: %w", ErrCorrupt, err))
			}
			if len(run) > 0 {
				parts = append(parts, run)
				size += len(run)
			}
		}
		if next < o.Next && !full {
			return nil, m.readFailed(fmt.Errorf("%w: %s ends at %d, its index entry at %d", ErrCorrupt, o.Key, next, o.Next))
		}
	}
	out := bytes.Join(parts, nil) // a copy: the caller may keep it, the cache's chunks stay as they are
	m.stats.remoteReadBytes.Add(int64(len(out)))
	return out, nil
}

func (m *Manager) readFailed(err error) error {
	m.stats.readErrors.Add(1)
	return err
}

// takeBatches returns the longest prefix of src, whole batches, that keeps
// a response already holding have bytes within maxBytes (the response's
// first batch always). It returns the offset after the last batch taken
// (next if none) and whether a batch did not fit: then the read must stop
// there, or it would skip that batch.
func takeBatches(src []byte, next wal.Offset, have, maxBytes int) ([]byte, wal.Offset, bool, error) {
	n := 0
	full := false
	err := object.Batches(src, func(batch []byte) error {
		if have+n > 0 && have+n+len(batch) > maxBytes {
			full = true
			return errFull
		}
		h, err := wal.ParseBatchHeader(batch)
		if err != nil {
			return err
		}
		n += len(batch)
		next = h.LastOffset() + 1
		return nil
	})
	if errors.Is(err, errFull) {
		err = nil
	}
	return src[:n], next, full || have+n >= maxBytes, err
}

var errFull = errors.New("tier: response full")

// storeErr classifies an object-store error for a reader.
func storeErr(key string, err error) error {
	if errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("%w: %s is named by the index but missing from the store", ErrCorrupt, key)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, key, err)
}

// footerFill returns the fill that GETs an object's last bytes, enough to
// hold its footer (a second GET when the footer is longer than the first).
func (m *Manager) footerFill(o RemoteObject) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		n := min(o.Size, object.SuggestedTailSize)
		tail, err := m.cfg.Store.Get(ctx, o.Key, o.Size-n, n)
		if err != nil {
			return nil, storeErr(o.Key, err)
		}
		if _, err := object.ParseFooter(tail, o.Size); errors.Is(err, object.ErrShortTail) {
			flen, terr := object.ParseTrailer(tail)
			if terr != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, o.Key, terr)
			}
			n = min(o.Size, int64(flen)+object.TrailerSize)
			if tail, err = m.cfg.Store.Get(ctx, o.Key, o.Size-n, n); err != nil {
				return nil, storeErr(o.Key, err)
			}
		}
		if _, err := object.ParseFooter(tail, o.Size); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, o.Key, err)
		}
		return tail, nil
	}
}

// footer returns an object's parsed footer, its bytes through the cache.
func (m *Manager) footer(ctx context.Context, o RemoteObject) (*object.Footer, error) {
	tail, err := m.cfg.Cache.Get(ctx, "footer:"+o.Key, m.footerFill(o))
	if err != nil {
		return nil, err
	}
	f, err := object.ParseFooter(tail, o.Size)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, o.Key, err)
	}
	if f.BaseOffset != o.Base || f.NextOffset != o.Next {
		return nil, fmt.Errorf("%w: %s holds [%d, %d), the index says [%d, %d)", ErrCorrupt, o.Key, f.BaseOffset, f.NextOffset, o.Base, o.Next)
	}
	return f, nil
}

// chunkFill returns the fill that GETs and verifies chunk i of o.
func (m *Manager) chunkFill(o RemoteObject, f *object.Footer, i int) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		pos, n := f.ChunkRange(i)
		data, err := m.cfg.Store.Get(ctx, o.Key, pos, n)
		if err != nil {
			return nil, storeErr(o.Key, err)
		}
		if err := object.VerifyChunk(f, i, data); err != nil {
			return nil, fmt.Errorf("%w: %s chunk %d: %w", ErrCorrupt, o.Key, i, err)
		}
		return data, nil
	}
}

func chunkKey(o RemoteObject, i int) string { return fmt.Sprintf("chunk:%s#%d", o.Key, i) }

// chunk returns chunk i of o, verified, through the cache.
func (m *Manager) chunk(ctx context.Context, o RemoteObject, f *object.Footer, i int) ([]byte, error) {
	return m.cfg.Cache.Get(ctx, chunkKey(o, i), m.chunkFill(o, f, i))
}

// readAhead starts fills of the ReadAhead chunks after chunk i of o,
// continuing into the following objects whose footers are cached.
func (m *Manager) readAhead(o RemoteObject, f *object.Footer, i int, after []RemoteObject) {
	left := m.cfg.ReadAhead
	for j := i + 1; j < f.NumChunks() && left > 0; j++ {
		m.cfg.Cache.Prefetch(chunkKey(o, j), m.chunkFill(o, f, j))
		left--
	}
	for _, next := range after {
		if left <= 0 {
			return
		}
		// The next object's footer is fetched ahead, and once it is known
		// the chunks the window still has room for: a replay does not wait
		// at each object's first chunk.
		m.cfg.Cache.Prefetch("footer:"+next.Key, m.footerThenChunks(next, left))
		left -= min(left, 2)
	}
}

// footerThenChunks is a footer fill that, once the footer is read, starts
// fills of the object's first n chunks.
func (m *Manager) footerThenChunks(o RemoteObject, n int) func(context.Context) ([]byte, error) {
	fill := m.footerFill(o)
	return func(ctx context.Context) ([]byte, error) {
		tail, err := fill(ctx)
		if err != nil {
			return nil, err
		}
		if f, err := object.ParseFooter(tail, o.Size); err == nil {
			for i := 0; i < f.NumChunks() && i < n; i++ {
				m.cfg.Cache.Prefetch(chunkKey(o, i), m.chunkFill(o, f, i))
			}
		}
		return tail, nil
	}
}

// FindTimestamp returns the first batch of the remote log whose max
// timestamp is >= ts, or nil if none is.
func (m *Manager) FindTimestamp(ctx context.Context, topicID [16]byte, n int32, ts int64) ([]byte, error) {
	h, err := m.cachedHead(ctx, topicID, n)
	if err != nil {
		return nil, err
	}
	objs, err := m.objectsFrom(ctx, h, h.LogStart)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.MaxTs < ts {
			continue
		}
		f, err := m.footer(ctx, o)
		if err != nil {
			return nil, m.readFailed(err)
		}
		for i, ok := f.ChunkForTimestamp(ts); ok && i < f.NumChunks(); i++ {
			data, err := m.chunk(ctx, o, f, i)
			if err != nil {
				return nil, m.readFailed(err)
			}
			var found []byte
			err = object.Batches(data, func(batch []byte) error {
				bh, err := wal.ParseBatchHeader(batch)
				if err != nil {
					return err
				}
				if bh.MaxTimestamp >= ts && bh.LastOffset() >= wal.Offset(h.LogStart) {
					found = append([]byte(nil), batch...)
					return errFull
				}
				return nil
			})
			if found != nil {
				return found, nil
			}
			if err != nil && !errors.Is(err, errFull) {
				return nil, m.readFailed(fmt.Errorf("%w: %w", ErrCorrupt, err))
			}
		}
	}
	return nil, nil
}

// LastSnapshot returns the producer snapshot stored in the partition's last
// committed object (the one ending at the remote end), checksum verified,
// or nil when nothing is tiered.
func (m *Manager) LastSnapshot(ctx context.Context, topicID [16]byte, n int32) ([]byte, wal.Offset, error) {
	h, err := m.refreshHead(ctx, topicID, n)
	if err != nil || len(h.Objects) == 0 {
		return nil, 0, err
	}
	last := h.Objects[len(h.Objects)-1]
	o := RemoteObject{Key: last.Key, Base: wal.Offset(last.Base), Next: wal.Offset(last.Next), Size: last.Size, MaxTs: last.MaxTs}
	f, err := m.footer(ctx, o)
	if err != nil {
		return nil, 0, err
	}
	pos, size := f.SnapshotRange()
	if size == 0 {
		return nil, o.Next, nil
	}
	data, err := m.cfg.Store.Get(ctx, o.Key, pos, size)
	if err != nil {
		return nil, 0, storeErr(o.Key, err)
	}
	if err := object.VerifySnapshot(f, data); err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %w", ErrCorrupt, o.Key, err)
	}
	return data, o.Next, nil
}
