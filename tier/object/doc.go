// Package object owns the format of one tiered object: a contiguous offset
// range of one partition, written to object storage with one PUT and read
// back with ranged GETs. It builds objects (Builder), decodes their footer
// (ParseTrailer, ParseFooter), finds chunks by offset, timestamp and epoch
// (Footer), and checks what a ranged GET returned (VerifyChunk,
// VerifySnapshot). It is pure code: it does no I/O, starts no goroutine and
// keeps no state besides the values it returns; the caller moves the bytes.
//
// # Object, version 1
//
//	+-----------+-----------+-----+-------------+-------------------+--------+---------+
//	| chunk 0   | chunk 1   | ... | chunk n-1   | producer snapshot | footer | trailer |
//	| batches   | batches   |     | batches     | opaque, may be 0 B|        | 16 B    |
//	+-----------+-----------+-----+-------------+-------------------+--------+---------+
//	0                                           ^ snapshot position          ^ size-16
//
// A chunk is whole Kafka v2 record batches exactly as the log stores them
// (wal/doc.go draws one; bytes unchanged, stamped base offset and leader
// epoch included), contiguous in offsets: each batch's base offset is the
// previous batch's last offset + 1, and each chunk begins where the
// previous one ended, in bytes and in offsets. A chunk is closed when the
// next batch would take it past the target size (BuilderConfig,
// default 4 MiB); a batch is never split, so a batch larger than the
// target is a chunk of its own. The producer snapshot is bytes the caller
// gives (the partition's producer state at the object's end); this package
// does not interpret them.
//
// All integers are big-endian and fixed-width; offsets and timestamps are
// i64, epochs i32, as in Kafka. Every CRC is CRC-32C (Castagnoli), the
// checksum of Kafka's record batches.
//
// # Trailer, the last 16 bytes of every version
//
//	 0                4           6            8         12
//	+----------------+-----------+------------+---------+--------+
//	| footerLength   | version   | reserved   | crc     | magic  |
//	| u32            | u16 = 1   | u16 = 0    | u32     | "SLTO" |
//	+----------------+-----------+------------+---------+--------+
//
// crc is the CRC-32C of bytes 0..8. footerLength is the footer's size in
// bytes; the footer ends where the trailer begins. A reader that knows the
// object's size GETs its last SuggestedTailSize bytes (or all of a smaller
// object) and calls ParseFooter; when that fails with ErrShortTail, the
// footer is longer than what it fetched, and it GETs the last
// footerLength+16 bytes (ParseTrailer) and tries again. footerLength is at
// most MaxFooterSize, so garbage can never ask for more.
//
// Every future version keeps this trailer's shape (length, version, crc,
// magic at these positions). A reader checks magic, then crc, then version:
// a version above the one it knows is ErrUnsupportedVersion (a newer
// Sluice wrote it; the reader refuses the object rather than guess), a
// bad magic, crc, version 0 or reserved bits are ErrCorrupt.
//
// # Footer, version 1
//
//	 0        4         6        8                  24          28         32
//	+--------+---------+--------+------------------+-----------+----------+
//	| magic  | version | flags  | topicID          | partition | reserved |
//	| "SLOF" | u16 = 1 | u16 = 0| [16]u8           | i32       | u32 = 0  |
//	+--------+---------+--------+------------------+-----------+----------+
//	 32              40              48              56
//	+---------------+---------------+---------------+
//	| baseOffset    | nextOffset    | objectSize    |
//	| i64 (>= 0)    | i64 (> base)  | i64           |
//	+---------------+---------------+---------------+
//	 56               64               72            76           80           84         88
//	+----------------+----------------+-------------+------------+------------+----------+
//	| snapshotPos    | snapshotLen    | snapshotCRC | chunkCount | epochCount | reserved |
//	| i64            | i64            | u32         | u32 (>= 1) | u32 (>= 1) | u32 = 0  |
//	+----------------+----------------+-------------+------------+------------+----------+
//	 88
//	+----------------------------+----------------------------+-----------+
//	| chunk entry, 52 B          | epoch entry, 12 B          | crc       |
//	| x chunkCount               | x epochCount               | u32       |
//	+----------------------------+----------------------------+-----------+
//
// Chunk entry (52 bytes):
//
//	 0             8             16            24         28           32             40             48      52
//	+-------------+-------------+-------------+----------+------------+--------------+--------------+-------+
//	| firstOffset | lastOffset  | position    | length   | batchCount | minTimestamp | maxTimestamp | crc   |
//	| i64         | i64         | i64         | u32      | u32 (>= 1) | i64          | i64          | u32   |
//	+-------------+-------------+-------------+----------+------------+--------------+--------------+-------+
//
// firstOffset is the chunk's first batch's base offset, lastOffset the
// offset of the last record of its last batch, position and length its
// bytes in the object, crc the CRC-32C of those bytes. minTimestamp is the
// smallest baseTimestamp and maxTimestamp the largest maxTimestamp of its
// batches (-1 when they carry none, as Kafka writes it); a record inside a
// batch may be older than its batch's baseTimestamp, so minTimestamp is a
// hint, while maxTimestamp bounds every record in the chunk.
//
// Epoch entry (12 bytes), the leader-epoch chain over the object's range
// (wal's epochs file has the same entry):
//
//	 0                  4                          12
//	+------------------+--------------------------+
//	| epoch i32 (>= 0) | startOffset i64          |
//	+------------------+--------------------------+
//
// The first entry starts at baseOffset (the epoch in force there, even if
// it began earlier), epochs and starts strictly increase, and every start
// is below nextOffset. Every batch carries, in its header, the epoch of
// the entry in force at its base offset.
//
// The footer's crc is the CRC-32C of all footer bytes before it. The
// footer's version must equal the trailer's. objectSize is the whole
// object's size, trailer included; a reader compares it with the size it
// got from the store. The chunks tile [0, snapshotPos) in bytes and
// [baseOffset, nextOffset) in offsets, and snapshotPos + snapshotLen is
// where the footer starts. A reader rejects any footer that breaks one of
// these rules as ErrCorrupt, so no offset of [baseOffset, nextOffset)
// falls outside a chunk.
//
// Limits: at most MaxChunks chunks and MaxEpochs epoch entries, so a
// footer is at most MaxFooterSize (about 4 MiB) bytes; the builder refuses
// an object beyond them. A reader checks every count against the bytes it
// holds before it allocates for it.
//
// # Reading
//
// Offset → chunk is Footer.ChunkFor, a ListOffsets timestamp → chunk is
// Footer.ChunkForTimestamp; Footer.ChunkRange gives the bytes to GET.
// VerifyChunk checks the bytes a GET returned (length, crc, and that the
// batches inside parse and agree with the chunk's entry), after which
// Batches walks them and SliceFrom cuts them to the batches a fetch from a
// given offset needs. VerifySnapshot checks the producer snapshot.
package object
