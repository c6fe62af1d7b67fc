package wal

// journal.go owns the Journal: one write-ahead file stream shared by every
// Log of a broker (of a data disk), so that one fsync makes every
// partition's appends since the previous one durable. Segments are written
// as before but synced only at checkpoints; after a crash the journal
// records above the last checkpoint are replayed into the segments. See the
// package doc ("Journal") for the format and the reasoning.
//
// Invariant: records are written in the order they were submitted, and a
// Log submits under its wmu, so a key's records are in its log's order.
// Invariant: a Log's segment write precedes its journal submission, so when
// a checkpoint has fsynced every registered Log, every record below the LSN
// it read before those fsyncs is in a segment on disk.
// Invariant: durable only grows; a failed write or fsync is sticky and fails
// every Log with records in flight.
//
// Goroutines: the committer (writes and fsyncs the pending records; owns
// file, fileStart, fileSize) and the checkpointer (after Start). Everything
// else is guarded by mu; the committer takes no Log lock while holding mu.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// Journal defaults.
const (
	DefaultJournalFileBytes       = 16 << 20
	DefaultJournalCheckpointBytes = 64 << 20
	DefaultJournalCheckpointEvery = 30 * time.Second
)

// JournalConfig holds the journal's tunables; zero fields mean the defaults.
type JournalConfig struct {
	// FileBytes: start a new journal file once the current one holds this much.
	FileBytes int64
	// CheckpointBytes: checkpoint once this many journal bytes were written
	// since the last checkpoint. It bounds the replay after a crash.
	CheckpointBytes int64
	// CheckpointEvery: checkpoint at least this often while records arrive.
	CheckpointEvery time.Duration
	// ObserveSync, if set, is called after each round's fsync with its
	// duration and the bytes it made durable (for metrics).
	ObserveSync func(took time.Duration, bytes int)
}

func (c JournalConfig) withDefaults() JournalConfig {
	if c.FileBytes <= 0 {
		c.FileBytes = DefaultJournalFileBytes
	}
	if c.CheckpointBytes <= 0 {
		c.CheckpointBytes = DefaultJournalCheckpointBytes
	}
	if c.CheckpointEvery <= 0 {
		c.CheckpointEvery = DefaultJournalCheckpointEvery
	}
	return c
}

// journalNote tells a Log that its records up to end are in a round. gen is
// the Log's durGen when they were submitted: a note from before a
// truncation is stale.
type journalNote struct {
	log *Log
	end Offset
	gen uint64
}

// recordRef locates one recovered record in a journal file.
type recordRef struct {
	file       int // index into Journal.files
	pos        int64
	lsn        int64
	size       int
	kind       byte
	base, last Offset
}

type journalFile struct {
	start int64 // LSN of its first record
	name  string
}

// Journal is the broker-wide write-ahead file stream; see the file comment.
type Journal struct {
	fs  vfs.FS
	dir string
	cfg JournalConfig
	log zerolog.Logger

	mu        sync.Mutex
	work      *sync.Cond // signalled when records are pending or on close
	done      *sync.Cond // broadcast after each round
	buf       []byte     // guarded by mu: records submitted, not yet written
	spare     []byte     // guarded by mu: the previous round's buffer, for reuse
	notes     []journalNote
	lsn       int64                  // guarded by mu: LSN after the last submitted record
	durable   int64                  // guarded by mu: LSN below which everything is fsynced
	failed    error                  // guarded by mu
	closing   bool                   // guarded by mu
	logs      map[*Log]struct{}      // guarded by mu: open Logs, synced by checkpoints
	recovered map[string][]recordRef // guarded by mu: records found at open, until claimed
	files     []journalFile          // guarded by mu: every file on disk, by start
	sinceCkpt int64                  // guarded by mu: bytes written since the last checkpoint
	ckptLSN   int64                  // guarded by mu
	ckptKick  chan struct{}
	spares    []string // guarded by mu: preallocated files ready for use
	spareSeq  int      // guarded by mu: names new spares

	ckptMu sync.Mutex // serialises checkpoints

	// Owned by the committer.
	file      vfs.File
	fileStart int64
	fileSize  int64

	stop    chan struct{}
	wg      sync.WaitGroup
	started bool
}

// OpenJournal opens (creating if needed) the journal in dir and reads every
// record above its checkpoint, so that Logs opened with OpenJournaled can
// replay theirs. New records go to a new file.
func OpenJournal(fs vfs.FS, dir string, cfg JournalConfig, log zerolog.Logger) (*Journal, error) {
	j := &Journal{
		fs: fs, dir: dir, cfg: cfg.withDefaults(),
		log:       log.With().Str("component", "journal").Str("dir", dir).Logger(),
		logs:      map[*Log]struct{}{},
		recovered: map[string][]recordRef{},
		ckptKick:  make(chan struct{}, 1),
		stop:      make(chan struct{}),
	}
	j.work = sync.NewCond(&j.mu)
	j.done = sync.NewCond(&j.mu)
	if err := vfs.MkdirAllDurable(fs, dir); err != nil {
		return nil, fmt.Errorf("wal: open journal %s: %w", dir, err)
	}
	began := time.Now()
	scanned, err := j.recover()
	if err != nil {
		return nil, err
	}
	if len(j.files) == 0 && len(j.spares) == 0 {
		if err := j.preallocate(initialSpares); err != nil {
			return nil, err
		}
	}
	if err := j.newFile(j.lsn); err != nil {
		return nil, err
	}
	j.durable = j.lsn
	n := 0
	for _, refs := range j.recovered {
		n += len(refs)
	}
	j.log.Info().Int64("checkpoint", j.ckptLSN).Int64("end", j.lsn).Int64("bytes_scanned", scanned).
		Int("records", n).Int("keys", len(j.recovered)).Int64("took_ms", time.Since(began).Milliseconds()).Msg("wal: journal recovered")
	j.wg.Add(1)
	go func() { defer j.wg.Done(); j.commitLoop() }()
	return j, nil
}

// recover reads the checkpoint, removes files wholly below it and indexes
// every record above it. It returns the bytes scanned.
func (j *Journal) recover() (int64, error) {
	data, err := vfs.ReadFile(j.fs, filepath.Join(j.dir, checkpointName), stampSize+1)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return 0, fmt.Errorf("wal: read journal checkpoint: %w", err)
	default:
		if j.ckptLSN, err = decodeCheckpoint(data); err != nil {
			return 0, err
		}
	}
	names, err := j.fs.ReadDir(j.dir)
	if err != nil {
		return 0, fmt.Errorf("wal: list journal %s: %w", j.dir, err)
	}
	for _, n := range names {
		switch {
		case filepath.Ext(n) == vfs.TmpSuffix:
			if err := j.fs.Remove(filepath.Join(j.dir, n)); err != nil {
				return 0, fmt.Errorf("wal: remove %s: %w", n, err)
			}
		case filepath.Ext(n) == spareSuffix:
			j.spares = append(j.spares, n)
			if seq, err := strconv.Atoi(strings.TrimSuffix(n, spareSuffix)); err == nil && seq > j.spareSeq {
				j.spareSeq = seq
			}
		}
		if start, ok := parseJournalFileName(n); ok {
			j.files = append(j.files, journalFile{start: start, name: n})
		}
	}
	slices.SortFunc(j.files, func(a, b journalFile) int { return int(a.start - b.start) })
	// Files wholly below the checkpoint are left over from a crash during
	// the checkpoint's removals.
	for len(j.files) > 1 && j.files[1].start <= j.ckptLSN {
		if err := j.fs.Remove(filepath.Join(j.dir, j.files[0].name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("wal: remove journal file %s: %w", j.files[0].name, err)
		}
		j.files = j.files[1:]
	}
	j.lsn = j.ckptLSN
	var scanned int64
	for i, f := range j.files {
		end, n, err := j.scanFile(i, f)
		if err != nil {
			return 0, err
		}
		scanned += n
		if i+1 < len(j.files) && end != j.files[i+1].start {
			return 0, fmt.Errorf("wal: journal file %s ends at LSN %d, the next starts at %d: %w",
				f.name, end, j.files[i+1].start, ErrCorrupt)
		}
		if end > j.lsn {
			j.lsn = end
		}
	}
	return scanned, nil
}

// scanFile indexes the records of file i at or above the checkpoint and
// returns the LSN after its last whole record and the bytes it read.
func (j *Journal) scanFile(i int, f journalFile) (int64, int64, error) {
	path := filepath.Join(j.dir, f.name)
	data, err := vfs.ReadFile(j.fs, path, 1<<31)
	if err != nil {
		return 0, 0, fmt.Errorf("wal: read journal file %s: %w", f.name, err)
	}
	if len(data) < journalHeaderSize {
		// Created, but the crash came before its header was synced: no
		// record can be in it.
		return f.start, int64(len(data)), nil
	}
	start, err := decodeJournalHeader(data)
	if err != nil {
		return 0, 0, fmt.Errorf("wal: journal file %s: %w", f.name, err)
	}
	if start != f.start {
		return 0, 0, fmt.Errorf("wal: journal file %s says it starts at %d: %w", f.name, start, ErrCorrupt)
	}
	pos := int64(journalHeaderSize)
	for pos < int64(len(data)) {
		lsn := f.start + pos - journalHeaderSize
		rec, size, err := decodeRecord(data[pos:], lsn)
		if errors.Is(err, errTorn) {
			break
		}
		if err != nil {
			return 0, 0, fmt.Errorf("wal: journal file %s at byte %d: %w", f.name, pos, err)
		}
		if lsn >= j.ckptLSN {
			j.recovered[rec.key] = append(j.recovered[rec.key],
				recordRef{file: i, pos: pos, lsn: lsn, size: size, kind: rec.kind, base: rec.base, last: rec.last})
		}
		pos += int64(size)
	}
	return f.start + pos - journalHeaderSize, int64(len(data)), nil
}

// newFile starts a journal file at LSN start: a recycled spare
// (journal_spares.go) when one is ready, else an empty file; its header is written
// and fsynced before its name is made durable. Called at open and by the
// committer.
func (j *Journal) newFile(start int64) error {
	name := journalFileName(start)
	path := filepath.Join(j.dir, name)
	spare := j.takeSpare()
	var f vfs.File
	var err error
	if spare != "" {
		f, err = j.fs.OpenFile(filepath.Join(j.dir, spare), os.O_RDWR, 0)
	} else {
		f, err = j.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	}
	if err != nil {
		return fmt.Errorf("wal: create journal file %s: %w", name, err)
	}
	fail := func(err error) error {
		_ = f.Close() // err is the one to report
		return fmt.Errorf("wal: start journal file %s: %w", name, err)
	}
	if _, err := f.WriteAt(encodeJournalHeader(start), 0); err != nil {
		return fail(err)
	}
	if err := vfs.DataSync(f); err != nil {
		return fail(err)
	}
	if spare != "" {
		// Reopened under its journal name, so that what touches it later
		// (fault injection in tests, error messages) sees that name.
		if err := f.Close(); err != nil {
			return fmt.Errorf("wal: start journal file %s: %w", name, err)
		}
		if err := j.fs.Rename(filepath.Join(j.dir, spare), path); err != nil {
			return fmt.Errorf("wal: start journal file %s: %w", name, err)
		}
		if f, err = j.fs.OpenFile(path, os.O_RDWR, 0); err != nil {
			return fmt.Errorf("wal: start journal file %s: %w", name, err)
		}
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		return fail(err)
	}
	if j.file != nil {
		if err := j.file.Close(); err != nil {
			j.log.Warn().Err(err).Msg("wal: close full journal file")
		}
	}
	j.file, j.fileStart, j.fileSize = f, start, journalHeaderSize
	j.mu.Lock()
	if n := len(j.files); n == 0 || j.files[n-1].start != start {
		j.files = append(j.files, journalFile{start: start, name: name})
	}
	j.mu.Unlock()
	return nil
}

// submit queues records for the committer. note says which Log they belong
// to and the log end they reach; a zero note.log queues without notice.
// The caller holds that Log's wmu. It returns the LSN after the records.
func (j *Journal) submit(records []byte, note journalNote) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usableLocked(); err != nil {
		return 0, err
	}
	at := len(j.buf)
	j.buf = append(j.buf, records...)
	for rec := j.buf[at:]; len(rec) > 0; {
		n := sealRecord(rec, j.lsn)
		j.lsn += int64(n)
		rec = rec[n:]
	}
	j.noteLocked(note)
	return j.lsn, nil
}

// submitBatches is submit for append records whose headers (each
// recordHeaderSize+keyLen bytes, from appendRecordHeader) are in hdrs and
// whose payloads are batches: each payload is copied once, into the
// journal's buffer.
func (j *Journal) submitBatches(hdrs []byte, keyLen int, batches [][]byte, note journalNote) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usableLocked(); err != nil {
		return 0, err
	}
	hsize := recordHeaderSize + keyLen
	for i, b := range batches {
		at := len(j.buf)
		j.buf = append(j.buf, hdrs[i*hsize:(i+1)*hsize]...)
		j.buf = append(j.buf, b...)
		j.lsn += int64(sealRecord(j.buf[at:], j.lsn))
	}
	j.noteLocked(note)
	return j.lsn, nil
}

// usableLocked says why nothing may be submitted. The caller holds mu.
func (j *Journal) usableLocked() error {
	if j.failed != nil {
		return j.failed
	}
	if j.closing {
		return ErrClosed
	}
	return nil
}

// noteLocked records who to tell about the records just queued and wakes
// the committer. The caller holds mu.
func (j *Journal) noteLocked(note journalNote) {
	if note.log != nil {
		if n := len(j.notes); n > 0 && j.notes[n-1].log == note.log && j.notes[n-1].gen == note.gen {
			j.notes[n-1].end = note.end
		} else {
			j.notes = append(j.notes, note)
		}
	}
	j.work.Signal()
}

// commitLoop writes and fsyncs whatever was submitted since the previous
// round; records submitted during a round form the next one.
func (j *Journal) commitLoop() {
	for {
		j.mu.Lock()
		for len(j.buf) == 0 && !j.closing && j.failed == nil {
			j.work.Wait()
		}
		if j.failed != nil || len(j.buf) == 0 {
			j.mu.Unlock()
			return
		}
		buf, notes, end := j.buf, j.notes, j.lsn
		j.buf, j.notes = j.spare[:0], nil
		j.mu.Unlock()

		err := j.writeRound(buf)

		j.mu.Lock()
		j.spare = buf
		if err != nil && j.failed == nil {
			j.failed = err
			j.log.Error().Err(err).Msg("wal: journal failed; every journaled log refuses appends until the broker restarts")
		}
		j.mu.Unlock()
		// Logs learn of the round before waiters on the journal do, so a
		// Sync that returns sees its Log's durable end.
		for _, n := range notes {
			n.log.journalDurable(n.end, n.gen, err)
		}
		j.mu.Lock()
		var late []journalNote
		if err == nil {
			j.durable = end
			j.sinceCkpt += int64(len(buf))
			if j.sinceCkpt >= j.cfg.CheckpointBytes {
				select {
				case j.ckptKick <- struct{}{}:
				default:
				}
			}
		} else {
			late, j.notes = j.notes, nil
		}
		j.done.Broadcast()
		j.mu.Unlock()
		if err != nil {
			// Records submitted during the failed round fail too.
			for _, n := range late {
				n.log.journalDurable(n.end, n.gen, err)
			}
			return
		}
	}
}

// writeRound appends buf to the journal, starting a new file first if the
// current one is full, and fsyncs it.
func (j *Journal) writeRound(buf []byte) error {
	if j.fileSize > journalHeaderSize && j.fileSize+int64(len(buf)) > j.cfg.FileBytes {
		// Every round fsyncs, so the full file is durable already.
		if err := j.newFile(j.fileStart + j.fileSize - journalHeaderSize); err != nil {
			return err
		}
	}
	if _, err := j.file.WriteAt(buf, j.fileSize); err != nil {
		return fmt.Errorf("wal: write journal at LSN %d: %w", j.fileStart+j.fileSize-journalHeaderSize, err)
	}
	j.fileSize += int64(len(buf))
	began := time.Now()
	if plantedSkipJournalSync {
		return nil
	}
	if err := vfs.DataSync(j.file); err != nil {
		return fmt.Errorf("wal: fsync journal: %w", err)
	}
	if j.cfg.ObserveSync != nil {
		j.cfg.ObserveSync(time.Since(began), len(buf))
	}
	return nil
}

// waitDurable blocks until everything below lsn is fsynced, or the journal failed.
func (j *Journal) waitDurable(lsn int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	// The committer writes everything submitted before it exits (on close
	// with nothing pending, or after a failure), so this wait ends.
	for j.durable < lsn && j.failed == nil {
		j.done.Wait()
	}
	if j.durable >= lsn {
		return nil
	}
	return j.failed
}

// Err is the journal's sticky failure, or nil.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failed
}

// register adds l to the Logs checkpoints sync, and hands it the records
// recovered for key (removing them from the index).
func (j *Journal) register(l *Log, key string) ([]recordRef, []journalFile) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.logs[l] = struct{}{}
	refs := j.recovered[key]
	delete(j.recovered, key)
	return refs, slices.Clone(j.files)
}

func (j *Journal) unregister(l *Log) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.logs, l)
}

// readRecord reads a recovered record.
func (j *Journal) readRecord(files []journalFile, ref recordRef) ([]byte, error) {
	f, err := j.fs.Open(filepath.Join(j.dir, files[ref.file].name))
	if err != nil {
		return nil, fmt.Errorf("wal: open journal file: %w", err)
	}
	defer func() { _ = f.Close() }() // read-only
	b := make([]byte, ref.size)
	if _, err := f.ReadAt(b, ref.pos); err != nil {
		return nil, fmt.Errorf("wal: read journal file %s at %d: %w", files[ref.file].name, ref.pos, err)
	}
	return b, nil
}
