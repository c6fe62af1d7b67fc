package hotkeys

// This file owns Meter, one partition's sketch behind a lock, fed with
// whole record batches, and the walk over the keys of an uncompressed
// batch's records.
//
// Invariant: mu guards every field; nothing blocks while it is held (a
// sampled compressed batch is decompressed only if one of the process's
// sampleSlots is free at once, and skipped otherwise).
// Invariant: ObserveBatch reads only the batch's length and the bytes after
// its 61-byte header, which the partition owner never rewrites (it stamps
// the base offset and epoch in the header in place), so a batch may be
// observed after it was handed to the owner.

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/broker/records"
	"github.com/sluice-mq/sluice/wal"
)

// SampleEvery is how often a compressed batch's keys are read: one
// compressed batch in SampleEvery per partition.
const SampleEvery = 8

// codecMask selects a batch's compression codec from its attributes.
const codecMask = 0x07

// Meter is one partition's ingress meter. The zero value is ready to use,
// with DefaultTau; it is safe for concurrent use.
type Meter struct {
	mu sync.Mutex
	s  *Sketch // made on first use
	// compressed batches and their records seen since the last sampled
	// one, which stands for them all.
	skipped        int
	skippedRecords int
}

// ObserveBatch counts one validated v2 record batch (h its parsed header)
// arriving at now: its bytes and records in the totals and its records'
// keys in the table (every batch uncompressed, one in SampleEvery
// compressed). A batch whose records do not parse counts in the totals
// only, as far as its keys could be read.
func (m *Meter) ObserveBatch(now time.Time, h wal.BatchHeader, batch []byte) {
	n := int(h.RecordCount)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.s == nil {
		m.s = New(DefaultTau)
	}
	w := m.s.Observe(now, len(batch), n)
	if n <= 0 || len(batch) < wal.BatchHeaderSize {
		return
	}
	if h.Attributes&codecMask == 0 {
		m.s.AddKeys(batch[wal.BatchHeaderSize:], n, w)
		return
	}
	m.skipped++
	m.skippedRecords += n
	if m.skipped < SampleEvery {
		return
	}
	// This batch's keys stand for all skippedRecords records.
	w *= float64(m.skippedRecords) / float64(n)
	select {
	case sampleSlots <- struct{}{}:
		defer func() { <-sampleSlots }()
	default:
		return // the next compressed batch is sampled instead
	}
	m.skipped, m.skippedRecords = 0, 0
	if raw, err := records.Decompress(h.Attributes&codecMask, batch[wal.BatchHeaderSize:]); err == nil {
		m.s.AddKeys(raw, n, w)
	}
}

// sampleSlots bounds the compressed batches decompressed at once for key
// sampling in the process (each at most records.MaxDecompressed), so that
// sampling never waits: a batch that finds no slot free is not sampled.
var sampleSlots = make(chan struct{}, 2)

// Report reads the partition's rates at now (see Sketch.Report).
func (m *Meter) Report(now time.Time, top int) Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.s == nil {
		return Report{Keys: []KeyRate{}}
	}
	return m.s.Report(now, top)
}

// EachKey calls fn with the key of each of the first n records of raw, the
// records section of an uncompressed v2 batch (after its 61-byte header),
// skipping records whose key is null. It stops at the first record that
// does not parse and reports whether every record did; fn's key aliases
// raw.
func EachKey(raw []byte, n int, fn func(key []byte)) bool {
	for range n {
		key, rest, ok := nextKey(raw)
		if !ok {
			return false
		}
		if key != nil {
			fn(key)
		}
		raw = rest
	}
	return true
}

// AddKeys is EachKey adding each key with weight w, without a closure on
// the per-record path.
func (s *Sketch) AddKeys(raw []byte, n int, w float64) bool {
	for range n {
		key, rest, ok := nextKey(raw)
		if !ok {
			return false
		}
		if key != nil {
			s.AddKey(key, w)
		}
		raw = rest
	}
	return true
}

// nextKey reads the record at the start of raw: its key (nil when null;
// empty but not nil when of length zero) and what follows the record.
func nextKey(raw []byte) (key, rest []byte, ok bool) {
	length, k := binary.Varint(raw)
	if k <= 0 || length < 1 || length > int64(len(raw)-k) {
		return nil, nil, false
	}
	rec := raw[k+1 : k+int(length)] // past the length and the attributes byte
	rest = raw[k+int(length):]
	for range 2 { // timestamp delta, offset delta
		if _, k = binary.Varint(rec); k <= 0 {
			return nil, nil, false
		}
		rec = rec[k:]
	}
	kl, k := binary.Varint(rec)
	switch {
	case k <= 0 || kl > int64(len(rec)-k):
		return nil, nil, false
	case kl < 0: // a null key
		return nil, rest, true
	}
	return rec[k : k+int(kl) : k+int(kl)], rest, true
}
