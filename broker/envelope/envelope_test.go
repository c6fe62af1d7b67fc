package envelope

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/payload/ref"
	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/wal"
)

// fakeClaimer knows completed sessions by reference id and tenant.
type fakeClaimer struct {
	sessions map[string]fakeSession
	claims   []string // tenant/ref of every call
	fail     error    // the claimer's own failure, when set
}

type fakeSession struct {
	tenant  string
	r       ref.Ref
	expired bool
}

func (f *fakeClaimer) Claim(_ context.Context, tenant string, r ref.Ref, _ node.RefSite) error {
	f.claims = append(f.claims, tenant+"/"+r.ID)
	if f.fail != nil {
		return f.fail
	}
	s, ok := f.sessions[r.ID]
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", ref.ErrUnknown, r.ID)
	case s.tenant != tenant:
		return fmt.Errorf("%w: %s", ref.ErrForeign, r.ID)
	case s.expired:
		return fmt.Errorf("%w: %s", ref.ErrExpired, r.ID)
	case s.r.Size != r.Size || s.r.SHA256 != r.SHA256:
		return fmt.Errorf("%w: %s", ref.ErrMismatch, r.ID)
	}
	return nil
}

func sampleRef(id string) ref.Ref {
	return ref.Ref{ID: id, Size: 100 << 20, SHA256: ref.SumHex(sha256.Sum256([]byte(id))), ContentType: "application/pdf"}
}

func envelopeRecord(r ref.Ref) kmsg.Record {
	rec := kmsg.Record{Value: []byte("preview")}
	for _, h := range r.Headers() {
		rec.Headers = append(rec.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
	}
	return rec
}

// batchOf encodes recs as one batch, compressed with zstd when zst.
func batchOf(t testing.TB, zst bool, recs ...kmsg.Record) ([]byte, wal.BatchHeader) {
	t.Helper()
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
	}
	raw := node.EncodeBatch(recs, idx, -1, -1, -1)
	if zst {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		enc, _ := zstd.NewWriter(nil)
		rb.Records = enc.EncodeAll(rb.Records, nil)
		rb.Attributes |= 4
		raw = rb.AppendTo(nil)
		binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
		binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	}
	h, err := node.ValidateBatch(raw, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	return raw, h
}

const tenantTopic = "acme~orders"

func TestCheckInlineRecordsPassWithoutClaims(t *testing.T) {
	for _, zst := range []bool{false, true} {
		f := &fakeClaimer{}
		raw, h := batchOf(t, zst, kmsg.Record{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 1000)},
			kmsg.Record{Value: []byte("sluice.ref is only text here"), Headers: []kmsg.Header{{Key: "trace", Value: []byte("sluice.x")}}})
		if claimed, err := Check(context.Background(), f, node.RefSite{Topic: tenantTopic}, raw, h, DefaultLimit); err != nil || claimed {
			t.Fatalf("zstd=%v: claimed %v, %v", zst, claimed, err)
		}
		if len(f.claims) != 0 {
			t.Fatalf("zstd=%v: claims %v for inline records", zst, f.claims)
		}
	}
}

const DefaultLimit = node.DefaultMaxInlineBytes

func TestCheckRefusesRecordOverMaxInline(t *testing.T) {
	for _, zst := range []bool{false, true} {
		big := kmsg.Record{Key: []byte("k"), Value: bytes.Repeat([]byte{'x'}, 2000)}
		exact := kmsg.Record{Value: bytes.Repeat([]byte{'y'}, 1000)}
		raw, h := batchOf(t, zst, exact, big, exact)
		_, err := Check(context.Background(), nil, node.RefSite{Topic: tenantTopic}, raw, h, 1000)
		if node.ErrorCode(err) != kerr.MessageTooLarge.Code {
			t.Fatalf("zstd=%v: %v, want MESSAGE_TOO_LARGE", zst, err)
		}
		if !strings.Contains(err.Error(), "POST /v1/uploads") || !strings.Contains(err.Error(), "record 1") {
			t.Fatalf("message does not name the record and the upload API: %v", err)
		}
		re := RecordErrors(err)
		if len(re) != 1 || re[0].RelativeOffset != 1 || !strings.Contains(*re[0].ErrorMessage, "max.inline.bytes 1000") {
			t.Fatalf("record errors %+v", re)
		}
		// Exactly at the limit passes, and so does a payload at the limit
		// with a key and headers (loadgen's 256 KiB records carry both:
		// counting them refused every one).
		withMeta := kmsg.Record{Key: []byte("key-7"), Value: bytes.Repeat([]byte{'z'}, 1000),
			Headers: []kmsg.Header{{Key: "sent-at", Value: []byte("1733140000000")}}}
		raw, h = batchOf(t, zst, exact, exact, withMeta)
		if _, err := Check(context.Background(), nil, node.RefSite{Topic: tenantTopic}, raw, h, 1000); err != nil {
			t.Fatalf("zstd=%v: payloads of exactly max.inline.bytes: %v", zst, err)
		}
	}
}

func TestCheckClaimsEnvelopes(t *testing.T) {
	good, other, old := sampleRef("good1"), sampleRef("other1"), sampleRef("old1")
	mismatched := good
	mismatched.Size++
	for _, zst := range []bool{false, true} {
		f := &fakeClaimer{sessions: map[string]fakeSession{
			good.ID:  {tenant: "acme", r: good},
			other.ID: {tenant: "globex", r: other},
			old.ID:   {tenant: "acme", r: old, expired: true},
		}}
		raw, h := batchOf(t, zst, kmsg.Record{Value: []byte("inline")}, envelopeRecord(good), envelopeRecord(good))
		if claimed, err := Check(context.Background(), f, node.RefSite{Topic: tenantTopic}, raw, h, DefaultLimit); err != nil || !claimed {
			t.Fatalf("zstd=%v: a completed session's reference: claimed %v, %v", zst, claimed, err)
		}
		if want := []string{"acme/good1"}; fmt.Sprint(f.claims) != fmt.Sprint(want) {
			t.Fatalf("claims %v, want %v (each reference once, for the topic's tenant)", f.claims, want)
		}
		for _, c := range []struct {
			r    ref.Ref
			want error
		}{{sampleRef("nope"), ref.ErrUnknown}, {other, ref.ErrForeign}, {old, ref.ErrExpired}, {mismatched, ref.ErrMismatch}} {
			raw, h := batchOf(t, zst, kmsg.Record{Value: []byte("inline")}, envelopeRecord(c.r))
			_, err := Check(context.Background(), f, node.RefSite{Topic: tenantTopic}, raw, h, DefaultLimit)
			if node.ErrorCode(err) != kerr.InvalidRecord.Code || !errors.Is(err, c.want) {
				t.Fatalf("zstd=%v %s: %v, want INVALID_RECORD wrapping %v", zst, c.r.ID, err, c.want)
			}
			if re := RecordErrors(err); len(re) != 1 || re[0].RelativeOffset != 1 {
				t.Fatalf("record errors %+v, want record 1", re)
			}
		}
	}
}

func TestCheckRefusesMalformedBeforeClaiming(t *testing.T) {
	good := sampleRef("good1")
	bad := envelopeRecord(good)
	bad.Headers = bad.Headers[:1] // sluice.ref without size and checksum
	f := &fakeClaimer{sessions: map[string]fakeSession{good.ID: {tenant: "acme", r: good}}}
	raw, h := batchOf(t, false, envelopeRecord(good), bad)
	_, err := Check(context.Background(), f, node.RefSite{Topic: tenantTopic}, raw, h, DefaultLimit)
	if node.ErrorCode(err) != kerr.InvalidRecord.Code || !errors.Is(err, ref.ErrMalformed) {
		t.Fatalf("%v, want INVALID_RECORD (malformed)", err)
	}
	if len(f.claims) != 0 {
		t.Fatalf("claimed %v although the batch is refused", f.claims)
	}
}

func TestCheckWithoutObjectStore(t *testing.T) {
	raw, h := batchOf(t, false, envelopeRecord(sampleRef("a")))
	_, err := Check(context.Background(), nil, node.RefSite{Topic: tenantTopic}, raw, h, DefaultLimit)
	if node.ErrorCode(err) != kerr.InvalidRecord.Code || !strings.Contains(err.Error(), "large payloads need an object store") {
		t.Fatalf("%v", err)
	}
}

func TestCheckClaimerFailureIsRetriable(t *testing.T) {
	f := &fakeClaimer{fail: errors.New("etcd: no leader")}
	raw, h := batchOf(t, false, envelopeRecord(sampleRef("a")))
	_, err := Check(context.Background(), f, node.RefSite{Topic: "orders"}, raw, h, DefaultLimit)
	if node.ErrorCode(err) != kerr.KafkaStorageError.Code {
		t.Fatalf("%v, want KAFKA_STORAGE_ERROR", err)
	}
	if f.claims[0] != "default/a" {
		t.Fatalf("claims %v: an unqualified topic is the default tenant's", f.claims)
	}
}

// BenchmarkCheck measures the check of one batch of 16 1 KiB records.
//
//	go test -run '^$' -bench Check ./broker/envelope/
func BenchmarkCheck(b *testing.B) {
	recs := make([]kmsg.Record, 16)
	for i := range recs {
		recs[i] = kmsg.Record{Key: []byte(fmt.Sprint("key", i)), Value: bytes.Repeat([]byte{byte(i)}, 1024)}
	}
	env := append(append([]kmsg.Record{}, recs[:15]...), envelopeRecord(sampleRef("good1")))
	f := &fakeClaimer{sessions: map[string]fakeSession{"good1": {tenant: "acme", r: sampleRef("good1")}}}
	for _, c := range []struct {
		name string
		zst  bool
		recs []kmsg.Record
	}{{"inline", false, recs}, {"inline-zstd", true, recs}, {"envelope", false, env}} {
		raw, h := batchOf(b, c.zst, c.recs...)
		if c.name == "inline" {
			// For scale: the validation every produced batch already gets.
			b.Run("reference-ValidateBatch", func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				for range b.N {
					if _, err := node.ValidateBatch(raw, 1<<20); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for range b.N {
				f.claims = f.claims[:0]
				if _, err := Check(context.Background(), f, node.RefSite{Topic: tenantTopic}, raw, h, DefaultLimit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzCheck: any batch a producer may send is checked without a panic,
// and a nil answer means every envelope in it was claimed.
func FuzzCheck(f *testing.F) {
	good := sampleRef("good1")
	bad := envelopeRecord(good)
	bad.Headers = bad.Headers[1:]
	for _, zst := range []bool{false, true} {
		raw, _ := batchOf(f, zst, envelopeRecord(good), kmsg.Record{Value: []byte("inline")})
		f.Add(raw)
		raw, _ = batchOf(f, zst, bad)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, err := node.ValidateBatch(raw, 1<<20)
		if err != nil {
			return
		}
		c := &fakeClaimer{sessions: map[string]fakeSession{good.ID: {tenant: "acme", r: good}}}
		_, _ = Check(context.Background(), c, node.RefSite{Topic: tenantTopic}, raw, h, 4096)
	})
}

// TestAppendBoundBelowSettle: a claimed batch's append is bounded well
// inside the ledger's settle time, claims included, so the leader's log
// end at claimed_ms + settle bounds every record claimed at claimed_ms.
func TestAppendBoundBelowSettle(t *testing.T) {
	if ClaimTimeout+AppendWithin > tier.DefaultRefSettle/2 {
		t.Fatalf("ClaimTimeout %v + AppendWithin %v is over half the ledger's settle time %v", ClaimTimeout, AppendWithin, tier.DefaultRefSettle)
	}
}
