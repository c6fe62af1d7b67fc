// Package wal is the local log of one partition: a directory of segments of
// Kafka v2 record batches, stored exactly as received after the broker stamps
// their base offset and leader epoch, with a sparse offset index and a time
// index per sealed segment, group-commit fsync, crash recovery, deletion of
// whole segments below an offset it is given, and truncation. It decides no
// deletion itself (see Deletion). It touches the disk only through wal/vfs.
//
// # Files
//
// A segment with base offset B (its first offset) is the file
// <B as 20 zero-padded digits>.log, like Kafka's 00000000000000000000.log.
// The last segment is active: appends go there. Older segments are sealed and
// immutable, and have B.index and B.timeindex, written (through B.index.tmp
// and a rename) by the first Sync after the segment was sealed. The active
// segment has no index files; its indexes live in memory and are rebuilt by
// scanning it on Open. The file logstart holds the log start offset, and the
// file epochs the leader-epoch chain and the fenced epoch.
//
// # .log: record batches, v2 (Kafka's format; magic is the version field)
//
//	 0                   8          12                    16      17
//	+-------------------+----------+---------------------+-------+--------+
//	| baseOffset i64    | length   | partitionLeaderEpoch| magic | crc    |
//	| (stamped by log)  | i32      | i32 (stamped by log)| i8 =2 | u32 ...
//	+-------------------+----------+---------------------+-------+--------+
//	 21          23                27              35             43
//	+-----------+-----------------+---------------+--------------+-----------+
//	| attrs i16 | lastOffsetDelta | baseTimestamp | maxTimestamp | producerId|
//	|           | i32             | i64           | i64          | i64       |
//	+-----------+-----------------+---------------+--------------+-----------+
//	 51            53             57            61
//	+-------------+--------------+-------------+-----------------------------+
//	| producerEp  | baseSequence | recordCount | records ...                 |
//	| i16         | i32          | i32         | (length-49 bytes)           |
//	+-------------+--------------+-------------+-----------------------------+
//
// All integers are big-endian. A batch is length+12 bytes. The CRC-32C
// (Castagnoli) covers bytes 21 to the end, so stamping baseOffset and
// partitionLeaderEpoch keeps it valid. Batches follow each other with no gap;
// each batch's baseOffset is the previous batch's baseOffset+lastOffsetDelta+1,
// and the first is B.
//
// # .index and .timeindex: version 1
//
// Both start with the same 48-byte header, which also summarises the sealed
// segment so Open can trust it without reading the .log:
//
//	 0        4         6       8            16           24         32
//	+--------+---------+-------+------------+------------+----------+--------------+
//	| magic  | version | kind  | baseOffset | nextOffset | logSize  | maxTimestamp |
//	| [4]u8  | u16 = 1 | u16   | i64 (= B)  | i64        | i64      | i64 (-1 none)|
//	+--------+---------+-------+------------+------------+----------+--------------+
//	 40       44       48
//	+--------+--------+---------------------------------------------+
//	| count  | crc    | count entries                               |
//	| u32    | u32    |                                             |
//	+--------+--------+---------------------------------------------+
//
// magic is "SLOI" with kind 1 for .index and "SLTI" with kind 2 for
// .timeindex. crc is the CRC-32C of bytes 0..44 followed by all entries.
// nextOffset is the offset after the segment's last batch and logSize the
// .log's size in bytes. Entries:
//
//	.index      +-------------------+-----------------+
//	(8 bytes)   | relOffset u32     | position u32    |   batch base offset - B, and its byte position
//	            +-------------------+-----------------+
//	.timeindex  +-------------------+-----------------+
//	(12 bytes)  | timestamp i64     | relOffset u32   |   every batch before B+relOffset has
//	            +-------------------+-----------------+   maxTimestamp <= timestamp
//
// An offset entry is added for a batch when at least IndexIntervalBytes were
// appended since the previous entry; a time entry is added alongside it when
// the running max timestamp grew. Both are strictly increasing in every field.
// The first batch (position 0) is never indexed: lookups fall back to it.
//
// # logstart: version 1
//
// The log start offset (Kafka's LogStartOffset), checkpointed by Open when
// missing, by DeleteBelow before it deletes a segment and by AdvanceStart
// (DeleteRecords). It is replaced whole through logstart.tmp, an fsync, a
// rename and a directory fsync (vfs.WriteFileDurable), so it is the old or
// the new value, never torn. 20 bytes:
//
//	 0        4         6          8              16       20
//	+--------+---------+----------+--------------+--------+
//	| magic  | version | reserved | startOffset  | crc    |
//	| "SLLS" | u16 = 1 | u16 = 0  | i64 (>= 0)   | u32    |
//	+--------+---------+----------+--------------+--------+
//
// crc is the CRC-32C of bytes 0..16. A reader that finds another version
// refuses to open the log (ErrUnknownVersion): a newer writer may have moved
// the start in a way it cannot interpret. A bad magic, size or crc is
// ErrCorrupt. The start never exceeds the durable end when written; the
// first segment holds it or begins at it. Sealed segments wholly below it
// are dead: unreadable, and removed by the next Maintain or DeleteBelow.
//
// # epochs: version 1
//
// The leader-epoch chain (Kafka's leader-epoch-checkpoint) and the fenced
// epoch (epochs.go). Entry (E, S) says the first batch of leader epoch E is
// at offset S; epochs and starts strictly increase along the entries. It is
// replaced whole through epochs.tmp, an fsync, a rename and a directory
// fsync: by Append, AppendGroup and AppendStamped before they write the
// first batch of an epoch above the last entry's, by Truncate after the
// segments' truncation is durable (without the entries at or above the
// truncation point), by SetFencedEpoch, and by Open when recovery changed
// the chain. 20 bytes, then count entries of 12:
//
//	 0        4         6          8             12        16       20
//	+--------+---------+----------+-------------+---------+--------+
//	| magic  | version | reserved | fencedEpoch | count   | crc    |
//	| "SLEP" | u16 = 1 | u16 = 0  | i32 (>= 0)  | u32     | u32    |
//	+--------+---------+----------+-------------+---------+--------+
//	 20                 24                         32
//	+------------------+---------------------------+
//	| epoch i32 (>= 0) | startOffset i64 (>= 0)    |   x count
//	+------------------+---------------------------+
//
// crc is the CRC-32C of bytes 0..16 followed by all entries. A reader that
// finds another version refuses to open the log (ErrUnknownVersion); a bad
// magic, size, crc, reserved field or entry order is ErrCorrupt. Open drops
// the entries at or above the recovered log end (a crash lost their
// batches) and those wholly below the log start, keeping the one that
// covers it. A log with batches but no file (written before it existed)
// gets its chain rebuilt from its batch headers: the header at each
// position of the sparse offset index, and every batch between two of
// different epochs. A new log writes the file at its first append.
//
// # Recovery
//
// Open removes *.tmp files and index files without a .log. For each sealed
// segment it trusts the index files if they decode, their CRCs match, both
// summaries agree, logSize equals the .log's size and the first and last
// indexed batch headers match; otherwise it scans the segment, validating
// every batch's length, magic, CRC and offset continuity, and rewrites the
// indexes. The last segment is always scanned. At the first torn or corrupt
// batch the segment is truncated there (logged with offset and position), and
// any later segment is removed: Sync fsyncs segments in order, so nothing
// after a torn segment was ever durable. An empty directory yields an empty
// log at offset 0. A deletion never removes the active segment, so the last
// segment's end is the log end, across restarts.
//
// Gaps (a segment whose base does not continue the previous one) are
// resolved by the rule in recover.go: segments wholly below the logstart
// checkpoint are leftovers of an interrupted deletion and are removed
// (deletion checkpoints first and deletes oldest first, stopping at the first
// failure); a gap after a segment that was never completely synced (no valid
// index files) ends the log there, as a torn segment does; any other gap, or
// a first segment that begins above the checkpoint, means durable data is
// missing, and Open refuses the log with ErrCorrupt naming the missing
// offsets. A log without a checkpoint (older format) drops the older side of
// a gap, as the deletion it interrupted intended, and gets a checkpoint.
//
// # Deletion
//
// The wal decides no deletion. Tier's retention state machine
// (tier/retention.go) reads Segments, decides the offset below which whole
// segments may go, and the broker calls DeleteBelow with it; DeleteRecords
// moves the log start with AdvanceStart. DeleteBelow removes whole sealed
// segments, oldest first, never the active one; AdvanceStart only moves the
// start, and the segments wholly below it are removed by the next Maintain
// or DeleteBelow. Besides that removal, Maintain only rolls a non-empty
// active segment older than SegmentAge. Config has no retention settings.
//
// # Concurrency
//
// One goroutine appends (Append, AppendStamped, AppendGroup, Truncate,
// Maintain, DeleteBelow, AdvanceStart, SetFencedEpoch, SetConfig, Delete);
// any goroutine may call Sync, Read, FindTimestamp, Segments, the offset
// accessors and the epoch accessors (Epochs, LastEpoch, EndOffsetForEpoch,
// FencedEpoch). Lock order: Log.wmu (appender) → Log.smu (group commit) →
// Log.mu (segment list, read by readers). Readers take a reference on the
// segments they read so a deletion can remove files under them; a file is
// closed when its last reader lets go.
//
// # Durability
//
// Nothing appended is durable until Sync returns. A failed write, fsync or
// directory fsync is sticky: every later Append, Sync, Truncate and Maintain
// returns it until the Log is reopened, because a retried fsync can report
// success on lost data; a failed logstart or epochs write is sticky the same way. A
// failed segment removal (DeleteBelow, Maintain) is not: the segment stays,
// dead, and the next DeleteBelow or Maintain retries. Truncate, AdvanceStart and SetFencedEpoch are
// durable when they return. Truncate lowers DurableEnd before it removes a
// byte, and a journal round's notice for appends made before a truncation
// never raises it again (the offsets may be reused by unsynced appends). Open and Delete make their directory changes durable: Open fsyncs
// the parent of every directory it creates, and Delete renames the log
// directory into a trash directory (fsyncing both parents) before removing
// anything, so a crash leaves the whole log or none of it.
//
// # Journal: one durable point for many logs (journal*.go)
//
// A broker opens one Journal per data disk and its logs with OpenJournaled.
// Each append is written to its segment (not synced) and then submitted to
// the journal, which writes whatever was submitted since its previous round
// with one write and one fsync and then tells every log in the round that its
// batches are durable. While a round is being written and synced, the next
// one fills. Segments are fsynced only by checkpoints (and by deletions and
// Close, as before); after a crash, each log replays the journal's records
// above the last checkpoint that its segments lack. The measurements that
// chose this design over synchronised per-partition fsyncs are in
// docs/durability.md.
//
// A directory of files <first LSN, 20 digits>.jnl; an LSN counts the bytes
// of records written since the journal was created. Each file starts with
// a 20-byte header, followed by records back to back:
//
//	 0        4          6          8             16
//	+--------+----------+----------+-------------+--------+
//	| "SLJN" | version  | reserved | first LSN   | crc    |   header: crc is the
//	|        | u16 = 1  | u16      | i64         | u32    |   CRC-32C of bytes 0..16
//	+--------+----------+----------+-------------+--------+
//
//	 0          4        8         16          20      21        22
//	+----------+--------+---------+-----------+-------+---------+-------+---------+
//	| hdr crc  | size   | LSN     | body crc  | kind  | key len | key   | payload |
//	| u32      | u32    | i64     | u32       | u8    | u8 = k  | k B   |         |
//	+----------+--------+---------+-----------+-------+---------+-------+---------+
//
// size is the whole record's length. hdr crc is the CRC-32C of bytes 4..20
// and body crc that of bytes 20..size; the appender computes the body CRC
// and the journal stamps the LSN and header CRC when it places the record.
// The key names the log (the broker uses "<topic id>/<partition>"). Kind 1
// is an append: the payload is one record batch as the segment holds it
// (stamped). Kind 2 is a truncation: the payload is the i64 offset the log
// was truncated to. A reader stops at the first record that is short,
// zeroed, fails a CRC or carries an LSN other than its position's: a crash
// tore it, or the file is a recycled one and the record is from its
// previous life. A kind it does not know is ErrUnknownVersion.
//
// Journal files are written in place (pwrite) and made durable with
// fdatasync. A file a checkpoint no longer needs is kept as a spare
// (<n>.spare, at most two) and becomes the next journal file (its header
// rewritten and fdatasynced before it is renamed), so that rounds overwrite
// allocated blocks and their fdatasync commits no file-system metadata. A
// new file is started (header fdatasynced, directory fsynced) when the
// current one is full, after a round fsynced it, and at every open. While
// they wait for a checkpoint, the segments' new bytes are handed to the
// kernel's writeback every MiB (sync_file_range), so a checkpoint's fsyncs
// find little left to write.
//
// CHECKPOINT (20 bytes, written through a temporary file, fsync, rename and
// directory fsync; the same shape as the file header and logstart):
//
//	 0        4          6          8             16
//	+--------+----------+----------+-------------+--------+
//	| "SLCP" | version  | reserved | LSN         | crc    |   crc: CRC-32C of bytes 0..16
//	|        | u16 = 1  | u16      | i64         | u32    |
//	+--------+----------+----------+-------------+--------+
//
// Every record below LSN is in a segment that was fsynced: a checkpoint
// reads the LSN, fsyncs every open log, then writes this file and removes
// the journal files wholly below it. Open removes such files left by a
// crash, indexes every record at or above LSN by key, and starts a new file.
// Replay (OpenJournaled) skips records its segments already hold and appends
// the rest; a truncation record marks the appends before it that it removed
// as dead. Truncate journals its record after the segments are truncated
// durably, and a journaled Sync waits for the journal's round, not an fsync
// of the segments.
package wal
