package wal

// cache.go owns what a log leaves in the kernel's page cache. After each
// fsync of the segments (a journaled log's checkpoint, or every group commit
// of a log that fsyncs its own segments), the durable bytes older than the
// log's newest Config.CacheTailBytes are dropped from the cache: the tail
// that followers, tailing consumers and the tier uploader read stays
// cached, and new appends reuse the pages just freed instead of drawing
// fresh ones from free memory. On a virtual machine whose memory the host
// backs lazily, a fresh page costs a host fault on its first write, and the
// copy into it several times the copy into a reused page
// (docs/durability.md, "Page cache"); a broker writing hundreds of MB/s
// spent most of its CPU there.
//
// Invariant: only bytes a completed fsync covered are dropped (the kernel
// would otherwise start writing back dirty pages for us), and never the
// newest CacheTailBytes of the log.
// Invariant: a segment's cacheDropped is read and written only by the
// holder of the sync baton; once the tail no longer reaches a segment, every
// older segment was dropped whole (to its last partial page), so a round
// stops at the first segment past the tail with nothing new to drop.

import "github.com/sluice-mq/sluice/wal/vfs"

// cachePage is the granularity of dropping: partial pages stay.
const cachePage = 4096

// dropColdPages drops the page cache of snap's durable bytes beyond the
// cache tail. The caller holds the sync baton and the references of snap.
func (l *Log) dropColdPages(snap syncSnapshot) {
	type span struct {
		s        *segment
		from, to int64
	}
	var spans []span
	l.mu.RLock()
	keep := l.cfg.CacheTailBytes
	if keep <= 0 {
		l.mu.RUnlock()
		return
	}
	i := len(l.segs) - 1
	for i >= 0 && l.segs[i] != snap.active {
		i-- // segments rolled after the snapshot: not durable yet
	}
	for ; i >= 0; i-- {
		s := l.segs[i]
		size := s.idx.size
		if s == snap.active {
			size = snap.activeSize
		}
		to := max(size-keep, 0) &^ (cachePage - 1)
		keep = max(keep-size, 0)
		from := min(s.cacheDropped, size)
		if to <= from {
			if keep == 0 {
				// Nothing new here beyond the tail: the rounds that
				// dropped this far dropped every older segment whole.
				break
			}
			continue
		}
		s.acquire()
		spans = append(spans, span{s, from, to})
	}
	l.mu.RUnlock()
	for _, sp := range spans {
		if err := vfs.DropCache(sp.s.file, sp.from, sp.to-sp.from); err != nil {
			l.log.Debug().Err(err).Int64("segment", int64(sp.s.base())).Msg("wal: drop page cache")
		}
		sp.s.cacheDropped = sp.to
		sp.s.release()
	}
}
