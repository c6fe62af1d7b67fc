package partition

// This file owns the producer-state snapshot of a partition, so idempotent
// producers keep their deduplication window across restarts even after the
// segments holding their batches were deleted, and idle producers expire.
// The file format and the invariant on what a snapshot covers are drawn in
// doc.go. Only Open, before the owner starts, and then the owner goroutine
// read or write it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sort"
	"strconv"

	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

const snapshotVersion = 1

// castagnoli is the CRC-32C table of the snapshot's checksum line.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxSnapshotBytes bounds a snapshot file read at open.
const maxSnapshotBytes = 256 << 20

type snapshotFile struct {
	Version   int                `json:"version"`
	Offset    int64              `json:"offset"`
	Producers []snapshotProducer `json:"producers"`
}

type snapshotProducer struct {
	ID           int64      `json:"id"`
	Epoch        int16      `json:"epoch"`
	LastAppendMs int64      `json:"last_append_ms"`
	Batches      [][3]int64 `json:"batches"`
}

func (p *Partition) nowMs() int64 {
	if p.opts.Now == nil {
		return 0
	}
	return p.opts.Now().UnixMilli()
}

// expireProducers forgets producers idle for longer than producerExpiry.
func (p *Partition) expireProducers() {
	if p.opts.ProducerExpiry <= 0 {
		return
	}
	cutoff := p.nowMs() - p.opts.ProducerExpiry.Milliseconds()
	for id, s := range p.producers {
		if s.lastAppendMs < cutoff {
			delete(p.producers, id)
		}
	}
}

// writeSnapshot saves the producer state covering the log up to its end.
// When that is exactly what this run last wrote durably (an idle
// partition at each maintenance pass), the file already says it and
// nothing is written: no file, no fsync. Nothing else writes or removes
// the file while the partition is open (the node does so only before it
// opens one or after it closed it), so what this run last wrote is what
// the file holds.
func (p *Partition) writeSnapshot() error {
	if p.opts.SnapshotPath == "" {
		return nil
	}
	data, err := p.encodeSnapshot()
	if err != nil {
		return err
	}
	if p.snapWritten != nil && bytes.Equal(data, p.snapWritten) {
		return nil
	}
	if err := vfs.WriteFileDurable(p.opts.FS, p.opts.SnapshotPath, data); err != nil {
		p.snapWritten = nil // the file may hold either version
		return err
	}
	p.snapWritten = data
	return nil
}

// encodeSnapshot encodes the producer state as of the log end in the
// snapshot file's format. Only the owner goroutine calls it.
func (p *Partition) encodeSnapshot() ([]byte, error) {
	snap := snapshotFile{Version: snapshotVersion, Offset: int64(p.log.EndOffset())}
	ids := make([]int64, 0, len(p.producers))
	for id := range p.producers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		s := p.producers[id]
		sp := snapshotProducer{ID: id, Epoch: s.epoch, LastAppendMs: s.lastAppendMs}
		for _, b := range s.batches {
			sp.Batches = append(sp.Batches, [3]int64{int64(b.firstSeq), int64(b.lastSeq), int64(b.base)})
		}
		snap.Producers = append(snap.Producers, sp)
	}
	line, err := json.Marshal(snap)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(line, "\n%08x\n", crc32.Checksum(line, castagnoli)), nil
}

// loadSnapshot restores producer state and returns the offset it covers,
// or 0 when there is no usable snapshot.
func (p *Partition) loadSnapshot() (wal.Offset, error) {
	if p.opts.SnapshotPath == "" {
		return 0, nil
	}
	data, err := vfs.ReadFile(p.opts.FS, p.opts.SnapshotPath, maxSnapshotBytes)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("partition: read producer snapshot: %w", err)
	}
	snap, err := decodeSnapshot(data)
	if err != nil || wal.Offset(snap.Offset) > p.log.EndOffset() {
		// A damaged snapshot, or one ahead of a log that lost its tail, is
		// not trusted: the whole local log is replayed instead.
		p.logger.Warn().Err(err).Int64("snapshot_offset", snap.Offset).Msg("ignoring producer snapshot")
		return 0, nil
	}
	for _, sp := range snap.Producers {
		s := &producerState{epoch: sp.Epoch, lastAppendMs: sp.LastAppendMs}
		for _, b := range sp.Batches {
			s.batches = append(s.batches, producerBatch{firstSeq: int32(b[0]), lastSeq: int32(b[1]), base: wal.Offset(b[2])})
		}
		if len(s.batches) > producerWindow {
			s.batches = s.batches[len(s.batches)-producerWindow:]
		}
		p.producers[sp.ID] = s
	}
	return wal.Offset(snap.Offset), nil
}

// decodeSnapshot parses and checks a snapshot file.
func decodeSnapshot(data []byte) (snapshotFile, error) {
	var snap snapshotFile
	line, rest, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return snap, errors.New("snapshot has no checksum line")
	}
	want, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 16, 32)
	if err != nil {
		return snap, fmt.Errorf("snapshot checksum: %w", err)
	}
	if got := crc32.Checksum(line, castagnoli); uint32(want) != got {
		return snap, fmt.Errorf("snapshot checksum %08x, computed %08x", want, got)
	}
	if err := json.Unmarshal(line, &snap); err != nil {
		return snap, fmt.Errorf("snapshot: %w", err)
	}
	if snap.Version != snapshotVersion {
		return snap, fmt.Errorf("snapshot version %d is not %d", snap.Version, snapshotVersion)
	}
	if snap.Offset < 0 {
		return snap, fmt.Errorf("snapshot offset %d", snap.Offset)
	}
	return snap, nil
}

// SnapshotAt rewrites a producer snapshot (the file format, as uploaded
// with an object) to cover exactly the offsets below at: batches at or
// above it are dropped, and producers left with none are forgotten. A
// partition that restarts at the remote end (its local log lost) installs
// it, so idempotent producers keep their deduplication window. The state
// of a producer whose epoch rose after at keeps the newer epoch: fencing
// can only be stricter.
func SnapshotAt(data []byte, at wal.Offset) ([]byte, error) {
	snap, err := decodeSnapshot(data)
	if err != nil {
		return nil, err
	}
	out := snapshotFile{Version: snapshotVersion, Offset: int64(at)}
	for _, sp := range snap.Producers {
		var kept [][3]int64
		for _, b := range sp.Batches {
			if b[2] < int64(at) {
				kept = append(kept, b)
			}
		}
		if len(kept) > 0 {
			sp.Batches = kept
			out.Producers = append(out.Producers, sp)
		}
	}
	line, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(line, "\n%08x\n", crc32.Checksum(line, castagnoli)), nil
}
