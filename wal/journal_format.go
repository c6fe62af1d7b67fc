package wal

// journal_format.go owns the bytes of the journal: its file header, its
// records and its checkpoint file (drawn in doc.go, "Journal").
//
// Invariant: a record is accepted only whole and with a matching CRC; the
// first record that is not ends the readable part of its file.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
)

const (
	journalSuffix     = ".jnl"
	spareSuffix       = ".spare"
	checkpointName    = "CHECKPOINT"
	journalMagic      = "SLJN"
	checkpointMagic   = "SLCP"
	journalVersion    = 1
	journalHeaderSize = stampSize // the first LSN, stamped (stamp.go)
	recordHeaderSize  = 22        // header crc 4, size 4, LSN 8, payload crc 4, kind 1, key length 1
	maxJournalKey     = 255

	recAppend   byte = 1 // payload: one stamped record batch
	recTruncate byte = 2 // payload: i64 offset the log was truncated to
)

// errTorn marks the end of a journal file's readable records: a short,
// zeroed or mismatching record, as a crash leaves one mid-write.
var errTorn = errors.New("wal: torn journal record")

// journalFileName is the name of the journal file whose first record has
// log sequence number (LSN) start.
func journalFileName(start int64) string {
	return fmt.Sprintf("%020d%s", start, journalSuffix)
}

// parseJournalFileName is journalFileName's inverse.
func parseJournalFileName(name string) (int64, bool) {
	if len(name) != 20+len(journalSuffix) || name[20:] != journalSuffix {
		return 0, false
	}
	n, err := strconv.ParseInt(name[:20], 10, 64)
	return n, err == nil && n >= 0
}

// encodeJournalHeader returns the header of a journal file whose first
// record has LSN start (a stamp, stamp.go).
func encodeJournalHeader(start int64) []byte {
	return encodeStamp(journalMagic, journalVersion, start)
}

// decodeJournalHeader reads the header at the start of a journal file.
func decodeJournalHeader(b []byte) (int64, error) {
	return decodeStamp(b, journalMagic, journalVersion, false, "journal header")
}

// appendRecord appends one record to dst, unsealed: its LSN and header CRC
// are filled in by sealRecord when the journal places it.
func appendRecord(dst []byte, kind byte, key string, payload []byte) []byte {
	dst = appendRecordHeader(dst, kind, key, payload)
	return append(dst, payload...)
}

// appendRecordHeader appends the header and key of a record whose payload
// follows separately (the journal copies payloads once, into its buffer).
// The body CRC is computed here, outside the journal's lock.
func appendRecordHeader(dst []byte, kind byte, key string, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recordHeaderSize-2)...)
	dst = append(dst, kind, byte(len(key)))
	dst = append(dst, key...)
	hdr := dst[start:]
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(hdr)+len(payload)))
	crc := crc32.Update(crc32.Checksum(hdr[20:], castagnoli), castagnoli, payload)
	binary.BigEndian.PutUint32(hdr[16:], crc)
	return dst
}

// sealRecord stamps the record at the start of rec with its LSN and header
// CRC and returns its size.
func sealRecord(rec []byte, lsn int64) int {
	binary.BigEndian.PutUint64(rec[8:], uint64(lsn))
	binary.BigEndian.PutUint32(rec[0:], crc32.Checksum(rec[4:20], castagnoli))
	return int(binary.BigEndian.Uint32(rec[4:]))
}

// journalRecord is one decoded record. For an append, base and last are the
// batch's offsets; for a truncation, base is the offset truncated to.
type journalRecord struct {
	kind       byte
	key        string
	payload    []byte // aliases the input
	base, last Offset
}

// decodeRecord decodes the record at the start of b, which must carry LSN
// lsn, and returns its size. A record that is short, zeroed, fails either
// CRC or carries another LSN (a record of the file's previous life, when it
// is recycled) is errTorn: the end of the readable records. One whose CRCs
// match but whose content is impossible is ErrCorrupt.
func decodeRecord(b []byte, lsn int64) (journalRecord, int, error) {
	var r journalRecord
	if len(b) < recordHeaderSize || crc32.Checksum(b[4:20], castagnoli) != binary.BigEndian.Uint32(b) {
		return r, 0, errTorn
	}
	size := int(binary.BigEndian.Uint32(b[4:]))
	if int64(binary.BigEndian.Uint64(b[8:])) != lsn || size < recordHeaderSize || size > len(b) {
		return r, 0, errTorn
	}
	if crc32.Checksum(b[20:size], castagnoli) != binary.BigEndian.Uint32(b[16:]) {
		return r, 0, errTorn
	}
	r.kind = b[20]
	keyLen := int(b[21])
	if recordHeaderSize+keyLen > size {
		return r, 0, fmt.Errorf("journal record: key of %d bytes past its end: %w", keyLen, ErrCorrupt)
	}
	r.key = string(b[recordHeaderSize : recordHeaderSize+keyLen])
	r.payload = b[recordHeaderSize+keyLen : size]
	switch r.kind {
	case recAppend:
		h, err := validateBatch(r.payload)
		if err != nil {
			return r, 0, fmt.Errorf("journal record for %q: %w", r.key, errors.Join(err, ErrCorrupt))
		}
		r.base, r.last = h.BaseOffset, h.LastOffset()
	case recTruncate:
		if len(r.payload) != 8 {
			return r, 0, fmt.Errorf("journal truncate record of %d bytes: %w", len(r.payload), ErrCorrupt)
		}
		r.base = Offset(binary.BigEndian.Uint64(r.payload))
	default:
		return r, 0, fmt.Errorf("journal record kind %d: %w", r.kind, ErrUnknownVersion)
	}
	return r, size, nil
}

// encodeCheckpoint returns the CHECKPOINT file for lsn (a stamp, stamp.go).
func encodeCheckpoint(lsn int64) []byte {
	return encodeStamp(checkpointMagic, journalVersion, lsn)
}

// decodeCheckpoint parses the CHECKPOINT file.
func decodeCheckpoint(b []byte) (int64, error) {
	return decodeStamp(b, checkpointMagic, journalVersion, true, "journal checkpoint")
}
