package wal

// index.go owns a segment's sparse offset and time indexes: their in-memory
// form (built while appending or scanning) and their file form (written once,
// when the segment is sealed; see doc.go for the byte layout).
//
// Invariant: offset entries have strictly increasing rel and pos, and each
// points at the start of a batch whose base offset is base+rel.
// Invariant: time entries have strictly increasing ts and rel; an entry (ts,
// rel) means every batch before base+rel has maxTimestamp <= ts, and rel is
// also an offset entry's rel.
// The segment's index is guarded by Log.mu while the segment is active; once
// sealed it never changes.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
)

type offsetEntry struct {
	rel uint32 // batch base offset minus segment base
	pos uint32 // byte position of the batch in the .log file
}

type timeEntry struct {
	ts  int64  // max timestamp of every batch before base+rel
	rel uint32 // batch base offset minus segment base
}

// segIndex is what the log knows about one segment's contents.
type segIndex struct {
	base       Offset
	next       Offset // offset after the last batch
	size       int64  // bytes of whole batches
	maxTS      int64  // largest batch maxTimestamp, -1 when empty
	offsets    []offsetEntry
	times      []timeEntry
	sinceIndex int // bytes appended since the last offset entry
}

func newSegIndex(base Offset) segIndex {
	return segIndex{base: base, next: base, maxTS: -1}
}

// add records a batch of n bytes with header h appended at position pos == size.
func (x *segIndex) add(h BatchHeader, n int, interval int) {
	if x.sinceIndex >= interval && x.size > 0 {
		rel := uint32(h.BaseOffset - x.base)
		x.offsets = append(x.offsets, offsetEntry{rel: rel, pos: uint32(x.size)})
		if len(x.times) == 0 || x.maxTS > x.times[len(x.times)-1].ts {
			x.times = append(x.times, timeEntry{ts: x.maxTS, rel: rel})
		}
		x.sinceIndex = 0
	}
	x.sinceIndex += n
	x.size += int64(n)
	x.next = h.LastOffset() + 1
	if h.MaxTimestamp > x.maxTS {
		x.maxTS = h.MaxTimestamp
	}
}

// lookup returns the position of the last indexed batch with base <= off.
func lookupOffset(base Offset, offsets []offsetEntry, off Offset) int64 {
	if off <= base {
		return 0
	}
	rel := off - base
	i := sort.Search(len(offsets), func(i int) bool { return Offset(offsets[i].rel) > rel })
	if i == 0 {
		return 0
	}
	return int64(offsets[i-1].pos)
}

// lookupTime returns an offset at or before the first batch whose
// maxTimestamp may be >= ts.
func lookupTime(base Offset, times []timeEntry, ts int64) Offset {
	i := sort.Search(len(times), func(i int) bool { return times[i].ts >= ts })
	if i == 0 {
		return base
	}
	return base + Offset(times[i-1].rel)
}

// Index file layout (see doc.go).
const (
	indexVersion      = 1
	indexHeaderSize   = 48
	offsetEntrySize   = 8
	timeEntrySize     = 12
	indexKindOffset   = 1
	indexKindTime     = 2
	indexMagicOffset  = "SLOI"
	indexMagicTime    = "SLTI"
	indexCRCFieldPos  = 44
	maxRelativeOffset = math.MaxUint32
)

// encodeIndex serialises the sealed index x as an index file of the given kind.
func encodeIndex(x *segIndex, kind uint16) []byte {
	magic, n := indexMagicOffset, len(x.offsets)
	entrySize := offsetEntrySize
	if kind == indexKindTime {
		magic, n, entrySize = indexMagicTime, len(x.times), timeEntrySize
	}
	b := make([]byte, indexHeaderSize+n*entrySize)
	copy(b, magic)
	binary.BigEndian.PutUint16(b[4:], indexVersion)
	binary.BigEndian.PutUint16(b[6:], kind)
	binary.BigEndian.PutUint64(b[8:], uint64(x.base))
	binary.BigEndian.PutUint64(b[16:], uint64(x.next))
	binary.BigEndian.PutUint64(b[24:], uint64(x.size))
	binary.BigEndian.PutUint64(b[32:], uint64(x.maxTS))
	binary.BigEndian.PutUint32(b[40:], uint32(n))
	p := indexHeaderSize
	if kind == indexKindTime {
		for _, e := range x.times {
			binary.BigEndian.PutUint64(b[p:], uint64(e.ts))
			binary.BigEndian.PutUint32(b[p+8:], e.rel)
			p += timeEntrySize
		}
	} else {
		for _, e := range x.offsets {
			binary.BigEndian.PutUint32(b[p:], e.rel)
			binary.BigEndian.PutUint32(b[p+4:], e.pos)
			p += offsetEntrySize
		}
	}
	binary.BigEndian.PutUint32(b[indexCRCFieldPos:], indexCRC(b))
	return b
}

func indexCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[:indexCRCFieldPos])
	return crc32.Update(c, castagnoli, b[indexHeaderSize:])
}

// decodeIndex parses an index file of the given kind into x (which must carry
// base), checking magic, version, checksum and entry order. It returns
// ErrCorrupt for anything it does not accept.
func decodeIndex(b []byte, kind uint16, x *segIndex) error {
	magic, entrySize := indexMagicOffset, offsetEntrySize
	if kind == indexKindTime {
		magic, entrySize = indexMagicTime, timeEntrySize
	}
	if len(b) < indexHeaderSize || string(b[:4]) != magic {
		return fmt.Errorf("wal: index of %d bytes: bad magic: %w", len(b), ErrCorrupt)
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != indexVersion || binary.BigEndian.Uint16(b[6:]) != kind {
		return fmt.Errorf("wal: index version %d kind %d unsupported: %w", v, binary.BigEndian.Uint16(b[6:]), ErrCorrupt)
	}
	n := int64(binary.BigEndian.Uint32(b[40:]))
	if int64(len(b)) != indexHeaderSize+n*int64(entrySize) {
		return fmt.Errorf("wal: index says %d entries in %d bytes: %w", n, len(b), ErrCorrupt)
	}
	if got := indexCRC(b); got != binary.BigEndian.Uint32(b[indexCRCFieldPos:]) {
		return fmt.Errorf("wal: index crc %08x mismatch: %w", got, ErrCorrupt)
	}
	if Offset(binary.BigEndian.Uint64(b[8:])) != x.base {
		return fmt.Errorf("wal: index base %d, segment %d: %w", int64(binary.BigEndian.Uint64(b[8:])), x.base, ErrCorrupt)
	}
	x.next = Offset(binary.BigEndian.Uint64(b[16:]))
	x.size = int64(binary.BigEndian.Uint64(b[24:]))
	x.maxTS = int64(binary.BigEndian.Uint64(b[32:]))
	if x.next < x.base || x.next-x.base > maxRelativeOffset+1 || x.size < 0 || x.size > MaxSegmentBytes ||
		(x.size == 0) != (x.next == x.base) {
		return fmt.Errorf("wal: index summary next=%d size=%d: %w", x.next, x.size, ErrCorrupt)
	}
	return decodeEntries(b[indexHeaderSize:], kind, x)
}

func decodeEntries(b []byte, kind uint16, x *segIndex) error {
	limit := uint32(x.next - x.base)
	if kind == indexKindTime {
		x.times = make([]timeEntry, 0, len(b)/timeEntrySize)
		for p := 0; p < len(b); p += timeEntrySize {
			e := timeEntry{ts: int64(binary.BigEndian.Uint64(b[p:])), rel: binary.BigEndian.Uint32(b[p+8:])}
			if k := len(x.times); e.rel == 0 || e.rel >= limit || e.ts > x.maxTS || (k > 0 && (e.ts <= x.times[k-1].ts || e.rel <= x.times[k-1].rel)) {
				return fmt.Errorf("wal: time index entry %d out of order: %w", len(x.times), ErrCorrupt)
			}
			x.times = append(x.times, e)
		}
		return nil
	}
	x.offsets = make([]offsetEntry, 0, len(b)/offsetEntrySize)
	for p := 0; p < len(b); p += offsetEntrySize {
		e := offsetEntry{rel: binary.BigEndian.Uint32(b[p:]), pos: binary.BigEndian.Uint32(b[p+4:])}
		if k := len(x.offsets); e.rel == 0 || e.rel >= limit || e.pos == 0 || int64(e.pos)+BatchHeaderSize > x.size ||
			(k > 0 && (e.rel <= x.offsets[k-1].rel || e.pos <= x.offsets[k-1].pos)) {
			return fmt.Errorf("wal: offset index entry %d out of order: %w", len(x.offsets), ErrCorrupt)
		}
		x.offsets = append(x.offsets, e)
	}
	return nil
}
