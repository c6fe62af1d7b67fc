package object

// codec.go owns the bytes of the footer and the trailer (doc.go draws
// them): encoding them for the Builder and decoding them for readers.
//
// Invariant: decoding checks every count and length against the bytes it
// holds before it allocates or indexes with it, so no input can make it
// allocate more than a small multiple of its input or panic.
// Invariant: for any footer decodeFooter accepts, appendFooter gives back
// exactly the bytes it was decoded from.
//
// Stateless: only constants and a CRC table live here.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/sluice-mq/sluice/wal"
)

// Format constants (doc.go).
const (
	// Version is the object format version this build writes and reads.
	Version = 1
	// TrailerSize is the size of the trailer that ends every object.
	TrailerSize = 16
	// MaxChunks and MaxEpochs bound a footer's tables.
	MaxChunks = 1 << 16
	MaxEpochs = 1 << 16
	// MinFooterSize and MaxFooterSize bound a version-1 footer.
	MinFooterSize = footerHeaderSize + chunkEntrySize + epochEntrySize + footerCRCSize
	MaxFooterSize = footerHeaderSize + MaxChunks*chunkEntrySize + MaxEpochs*epochEntrySize + footerCRCSize
	// SuggestedTailSize is what a reader should GET from the end of an
	// object first: enough for the footer of an object of 1,000 chunks.
	SuggestedTailSize = 64 << 10

	footerMagic      = "SLOF"
	trailerMagic     = "SLTO"
	footerHeaderSize = 88
	chunkEntrySize   = 52
	epochEntrySize   = 12
	footerCRCSize    = 4
)

// Byte positions in the trailer.
const (
	trFooterLen = 0
	trVersion   = 4
	trReserved  = 6
	trCRC       = 8
	trMagic     = 12
)

// Byte positions in the footer header.
const (
	ftMagic       = 0
	ftVersion     = 4
	ftFlags       = 6
	ftTopicID     = 8
	ftPartition   = 24
	ftReserved    = 28
	ftBaseOffset  = 32
	ftNextOffset  = 40
	ftObjectSize  = 48
	ftSnapshotPos = 56
	ftSnapshotLen = 64
	ftSnapshotCRC = 72
	ftChunkCount  = 76
	ftEpochCount  = 80
	ftReserved2   = 84
)

// Byte positions in a chunk entry.
const (
	chFirstOffset  = 0
	chLastOffset   = 8
	chPosition     = 16
	chLength       = 24
	chBatchCount   = 28
	chMinTimestamp = 32
	chMaxTimestamp = 40
	chCRC          = 48
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func footerSizeFor(chunks, epochs int) int {
	return footerHeaderSize + chunks*chunkEntrySize + epochs*epochEntrySize + footerCRCSize
}

// appendFooter appends f's version-1 footer to dst.
func appendFooter(dst []byte, f *Footer) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, f.footerSize())...)
	b := dst[start:]
	be := binary.BigEndian
	copy(b[ftMagic:], footerMagic)
	be.PutUint16(b[ftVersion:], Version)
	copy(b[ftTopicID:], f.TopicID[:])
	be.PutUint32(b[ftPartition:], uint32(f.Partition))
	be.PutUint64(b[ftBaseOffset:], uint64(f.BaseOffset))
	be.PutUint64(b[ftNextOffset:], uint64(f.NextOffset))
	be.PutUint64(b[ftObjectSize:], uint64(f.ObjectSize))
	be.PutUint64(b[ftSnapshotPos:], uint64(f.snapshot.pos))
	be.PutUint64(b[ftSnapshotLen:], uint64(f.snapshot.length))
	be.PutUint32(b[ftSnapshotCRC:], f.snapshot.crc)
	be.PutUint32(b[ftChunkCount:], uint32(len(f.chunks)))
	be.PutUint32(b[ftEpochCount:], uint32(len(f.epochs)))
	p := footerHeaderSize
	for _, c := range f.chunks {
		e := b[p : p+chunkEntrySize]
		be.PutUint64(e[chFirstOffset:], uint64(c.FirstOffset))
		be.PutUint64(e[chLastOffset:], uint64(c.LastOffset))
		be.PutUint64(e[chPosition:], uint64(c.Position))
		be.PutUint32(e[chLength:], uint32(c.Length))
		be.PutUint32(e[chBatchCount:], uint32(c.BatchCount))
		be.PutUint64(e[chMinTimestamp:], uint64(c.MinTimestamp))
		be.PutUint64(e[chMaxTimestamp:], uint64(c.MaxTimestamp))
		be.PutUint32(e[chCRC:], c.CRC)
		p += chunkEntrySize
	}
	for _, e := range f.epochs {
		be.PutUint32(b[p:], uint32(e.Epoch))
		be.PutUint64(b[p+4:], uint64(e.StartOffset))
		p += epochEntrySize
	}
	be.PutUint32(b[p:], crc32.Checksum(b[:p], castagnoli))
	return dst
}

// appendTrailer appends the trailer for a footer of footerLen bytes.
func appendTrailer(dst []byte, footerLen int) []byte {
	var t [TrailerSize]byte
	binary.BigEndian.PutUint32(t[trFooterLen:], uint32(footerLen))
	binary.BigEndian.PutUint16(t[trVersion:], Version)
	binary.BigEndian.PutUint32(t[trCRC:], crc32.Checksum(t[:trCRC], castagnoli))
	copy(t[trMagic:], trailerMagic)
	return append(dst, t[:]...)
}

// ParseTrailer decodes the trailer at the end of tail, the last bytes of an
// object, and returns the footer's length: the object's last
// footerLen+TrailerSize bytes hold footer and trailer. A tail shorter than
// the trailer is ErrShortTail.
func ParseTrailer(tail []byte) (footerLen int, err error) {
	if len(tail) < TrailerSize {
		return 0, fmt.Errorf("object: trailer needs %d bytes, have %d: %w", TrailerSize, len(tail), ErrShortTail)
	}
	t := tail[len(tail)-TrailerSize:]
	be := binary.BigEndian
	if string(t[trMagic:]) != trailerMagic {
		return 0, fmt.Errorf("object: trailer magic %q, want %q: %w", t[trMagic:], trailerMagic, ErrCorrupt)
	}
	if got, want := crc32.Checksum(t[:trCRC], castagnoli), be.Uint32(t[trCRC:]); got != want {
		return 0, fmt.Errorf("object: trailer crc %08x, says %08x: %w", got, want, ErrCorrupt)
	}
	switch v := be.Uint16(t[trVersion:]); {
	case v > Version:
		return 0, fmt.Errorf("object: format version %d, this build reads %d: %w", v, Version, ErrUnsupportedVersion)
	case v < Version:
		return 0, fmt.Errorf("object: format version %d: %w", v, ErrCorrupt)
	}
	if r := be.Uint16(t[trReserved:]); r != 0 {
		return 0, fmt.Errorf("object: trailer reserved bits %04x: %w", r, ErrCorrupt)
	}
	n := be.Uint32(t[trFooterLen:])
	if n < MinFooterSize || n > MaxFooterSize {
		return 0, fmt.Errorf("object: footer length %d outside [%d, %d]: %w", n, MinFooterSize, MaxFooterSize, ErrCorrupt)
	}
	return int(n), nil
}

// ParseFooter decodes and checks the footer of an object of objectSize
// bytes from tail, its last bytes (SuggestedTailSize of them, or the whole
// object). When tail holds the trailer but not the whole footer, the error
// is ErrShortTail: fetch the last footerLen+TrailerSize bytes (ParseTrailer)
// and call again. A damaged footer is ErrCorrupt, a newer format
// ErrUnsupportedVersion. The Footer does not alias tail.
func ParseFooter(tail []byte, objectSize int64) (*Footer, error) {
	if int64(len(tail)) > objectSize {
		return nil, fmt.Errorf("object: tail of %d bytes from an object of %d: %w", len(tail), objectSize, ErrInvalid)
	}
	if objectSize < MinFooterSize+TrailerSize {
		return nil, fmt.Errorf("object: %d bytes is too small for an object: %w", objectSize, ErrCorrupt)
	}
	n, err := ParseTrailer(tail)
	if err != nil {
		return nil, err
	}
	need := n + TrailerSize
	if int64(need) > objectSize {
		return nil, fmt.Errorf("object: footer of %d bytes in an object of %d: %w", n, objectSize, ErrCorrupt)
	}
	if need > len(tail) {
		return nil, fmt.Errorf("object: footer and trailer need the last %d bytes, have %d: %w", need, len(tail), ErrShortTail)
	}
	f, err := decodeFooter(tail[len(tail)-need : len(tail)-TrailerSize])
	if err != nil {
		return nil, err
	}
	if f.ObjectSize != objectSize {
		return nil, fmt.Errorf("object: footer says %d bytes, object has %d: %w", f.ObjectSize, objectSize, ErrCorrupt)
	}
	return f, nil
}

// decodeFooter decodes b, exactly one version-1 footer, and checks it.
func decodeFooter(b []byte) (*Footer, error) {
	be := binary.BigEndian
	if len(b) < MinFooterSize || len(b) > MaxFooterSize {
		return nil, fmt.Errorf("object: footer of %d bytes: %w", len(b), ErrCorrupt)
	}
	body := b[:len(b)-footerCRCSize]
	if got, want := crc32.Checksum(body, castagnoli), be.Uint32(b[len(body):]); got != want {
		return nil, fmt.Errorf("object: footer crc %08x, says %08x: %w", got, want, ErrCorrupt)
	}
	if string(b[ftMagic:ftMagic+4]) != footerMagic {
		return nil, fmt.Errorf("object: footer magic %q: %w", b[ftMagic:ftMagic+4], ErrCorrupt)
	}
	if v := be.Uint16(b[ftVersion:]); v != Version {
		return nil, fmt.Errorf("object: footer version %d, trailer says %d: %w", v, Version, ErrCorrupt)
	}
	if be.Uint16(b[ftFlags:]) != 0 || be.Uint32(b[ftReserved:]) != 0 || be.Uint32(b[ftReserved2:]) != 0 {
		return nil, fmt.Errorf("object: footer flags or reserved bits set: %w", ErrCorrupt)
	}
	nc, ne := be.Uint32(b[ftChunkCount:]), be.Uint32(b[ftEpochCount:])
	if nc < 1 || nc > MaxChunks || ne < 1 || ne > MaxEpochs || footerSizeFor(int(nc), int(ne)) != len(b) {
		return nil, fmt.Errorf("object: footer of %d bytes says %d chunks and %d epochs: %w", len(b), nc, ne, ErrCorrupt)
	}
	f := &Footer{
		Partition:  int32(be.Uint32(b[ftPartition:])),
		BaseOffset: wal.Offset(be.Uint64(b[ftBaseOffset:])),
		NextOffset: wal.Offset(be.Uint64(b[ftNextOffset:])),
		ObjectSize: int64(be.Uint64(b[ftObjectSize:])),
		chunks:     make([]Chunk, nc),
		epochs:     make([]wal.EpochEntry, ne),
		snapshot: section{
			pos:    int64(be.Uint64(b[ftSnapshotPos:])),
			length: int64(be.Uint64(b[ftSnapshotLen:])),
			crc:    be.Uint32(b[ftSnapshotCRC:]),
		},
	}
	copy(f.TopicID[:], b[ftTopicID:])
	p := footerHeaderSize
	for i := range f.chunks {
		e := b[p : p+chunkEntrySize]
		f.chunks[i] = Chunk{
			FirstOffset:  wal.Offset(be.Uint64(e[chFirstOffset:])),
			LastOffset:   wal.Offset(be.Uint64(e[chLastOffset:])),
			Position:     int64(be.Uint64(e[chPosition:])),
			Length:       int64(be.Uint32(e[chLength:])),
			BatchCount:   int(be.Uint32(e[chBatchCount:])),
			MinTimestamp: int64(be.Uint64(e[chMinTimestamp:])),
			MaxTimestamp: int64(be.Uint64(e[chMaxTimestamp:])),
			CRC:          be.Uint32(e[chCRC:]),
		}
		p += chunkEntrySize
	}
	for i := range f.epochs {
		f.epochs[i] = wal.EpochEntry{
			Epoch:       wal.Epoch(be.Uint32(b[p:])),
			StartOffset: wal.Offset(be.Uint64(b[p+4:])),
		}
		p += epochEntrySize
	}
	if err := checkFooter(f); err != nil {
		return nil, err
	}
	return f, nil
}
