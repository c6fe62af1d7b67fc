package e2e

// Raw Kafka frames over TCP, for requests no well-behaved client sends:
// a 4-byte size, the request header and a kmsg body out; a size, the
// response header and a kmsg body back. Record batches are built by hand
// so tests can corrupt exactly one field.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const rawIOTimeout = 15 * time.Second

type rawConn struct {
	t    testing.TB
	conn net.Conn
	corr int32
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, conn: c}
}

// write sends raw bytes as they are.
func (r *rawConn) write(b []byte) {
	r.t.Helper()
	r.conn.SetWriteDeadline(time.Now().Add(rawIOTimeout))
	if _, err := r.conn.Write(b); err != nil {
		r.t.Fatalf("write %d bytes: %v", len(b), err)
	}
}

// frame encodes req (with its version already set) as a full request frame.
func (r *rawConn) frame(req kmsg.Request) []byte {
	r.corr++
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("sluice-e2e-raw")).AppendRequest(nil, req, r.corr)
}

// roundTrip sends req and decodes the answer into resp at the same version.
func (r *rawConn) roundTrip(req kmsg.Request, resp kmsg.Response) {
	r.t.Helper()
	resp.SetVersion(req.GetVersion())
	r.roundTripAs(req, resp)
}

// roundTripAs sends req and decodes the answer into resp at resp's version
// (which may differ, e.g. a v0 ApiVersions answer to a too-new request).
func (r *rawConn) roundTripAs(req kmsg.Request, resp kmsg.Response) {
	r.t.Helper()
	r.write(r.frame(req))
	body, err := r.readFrame()
	if err != nil {
		r.t.Fatalf("%s v%d: read response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if len(body) < 4 {
		r.t.Fatalf("%s v%d: response of %d bytes has no correlation id", kmsg.NameForKey(req.Key()), req.GetVersion(), len(body))
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != r.corr {
		r.t.Fatalf("%s v%d: correlation id %d, want %d", kmsg.NameForKey(req.Key()), req.GetVersion(), corr, r.corr)
	}
	body = body[4:]
	if resp.IsFlexible() && resp.Key() != 18 { // ApiVersions never has a response header tag buffer
		rest, err := skipTags(body)
		if err != nil {
			r.t.Fatalf("%s v%d: response header tags: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
		body = rest
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("%s: decode v%d response (%d bytes): %v", kmsg.NameForKey(req.Key()), resp.GetVersion(), len(body), err)
	}
}

// readFrame reads one size-prefixed frame.
func (r *rawConn) readFrame() ([]byte, error) {
	r.conn.SetReadDeadline(time.Now().Add(rawIOTimeout))
	var size [4]byte
	if _, err := io.ReadFull(r.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > 64<<20 {
		return nil, fmt.Errorf("response size %d", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r.conn, body); err != nil {
		return nil, err
	}
	return body, nil
}

// expectClosed fails unless the broker closes the connection (EOF or a
// reset) without answering.
func (r *rawConn) expectClosed(what string) {
	r.t.Helper()
	r.conn.SetReadDeadline(time.Now().Add(rawIOTimeout))
	buf := make([]byte, 4096)
	n, err := r.conn.Read(buf)
	switch {
	case err == nil:
		r.t.Fatalf("%s: broker answered %d bytes (%x); want the connection closed", what, n, buf[:min(n, 32)])
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return
	case errors.Is(err, os.ErrDeadlineExceeded):
		r.t.Fatalf("%s: connection still open after %v; want it closed", what, rawIOTimeout)
	default:
		r.t.Fatalf("%s: read: %v; want EOF", what, err)
	}
}

// skipTags skips a tagged-field buffer and returns what follows.
func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[l:]
	for range n {
		_, l := binary.Uvarint(b) // tag
		if l <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[l+int(size):]
	}
	return b, nil
}

// kv is one record for a hand-built batch.
type kv struct{ key, value []byte }

// encodeBatch builds a magic-2 record batch with the given attributes
// (codec bits must be 0: records are not compressed), a correct length
// and a correct CRC-32C over bytes 21..end.
func encodeBatch(attrs int16, timestamp int64, recs ...kv) []byte {
	var records []byte
	for i, r := range recs {
		rec := kmsg.Record{OffsetDelta: int32(i), Key: r.key, Value: r.value}
		body := rec.AppendTo(nil)[1:] // Length 0 encodes as one varint byte
		rec.Length = int32(len(body))
		records = rec.AppendTo(records)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       timestamp,
		MaxTimestamp:         timestamp,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              records,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// fetchedRecord is one record read back from a raw Fetch.
type fetchedRecord struct {
	offset     int64
	key, value []byte
}

// decodeBatches splits a fetch response's record bytes into the records of
// its uncompressed data batches, failing on anything it cannot read.
func decodeBatches(t testing.TB, raw []byte) []fetchedRecord {
	t.Helper()
	var out []fetchedRecord
	for len(raw) >= 12 {
		length := int32(binary.BigEndian.Uint32(raw[8:]))
		if int(length)+12 > len(raw) {
			break // a partial trailing batch is allowed
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[:12+length]); err != nil {
			t.Fatalf("decode fetched batch: %v", err)
		}
		raw = raw[12+length:]
		if b.Attributes&0x20 != 0 {
			continue // control batch
		}
		if b.Attributes&0x07 != 0 {
			t.Fatalf("fetched batch is compressed (attributes %#x); this helper reads only uncompressed batches", b.Attributes)
		}
		recs := b.Records
		for range b.NumRecords {
			length, l := binary.Varint(recs)
			if l <= 0 || int(length)+l > len(recs) {
				t.Fatalf("fetched batch: bad record length")
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:l+int(length)]); err != nil {
				t.Fatalf("fetched record: %v", err)
			}
			out = append(out, fetchedRecord{offset: b.FirstOffset + int64(r.OffsetDelta), key: r.Key, value: r.Value})
			recs = recs[l+int(length):]
		}
	}
	return out
}
