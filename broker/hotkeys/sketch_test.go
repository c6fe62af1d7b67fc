package hotkeys

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/wal"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

// TestSketchSteadyRates drives a sketch on an injected clock with two hot
// keys over a cold tail of many more keys than counters: after 6 Tau the
// hot keys lead at their rates, and the totals are the offered load.
func TestSketchSteadyRates(t *testing.T) {
	s := New(time.Second)
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0
	const step = time.Millisecond // 1,000 batches per second
	for range 6000 {
		now = now.Add(step)
		w := s.Observe(now, 1000, 10) // 1 MB/s, 10,000 records/s
		for i := range 10 {
			switch {
			case i < 4:
				s.AddKey([]byte("hot"), w) // 4,000/s
			case i < 5:
				s.AddKey([]byte("warm"), w) // 1,000/s
			default:
				s.AddKey(fmt.Appendf(nil, "cold-%d", rng.IntN(1000)), w) // 5,000/s over 1,000 keys
			}
		}
	}
	r := s.Report(now, 3)
	if !near(r.BytesPerSec, 1e6, 0.01) || !near(r.RecordsPerSec, 1e4, 0.01) {
		t.Fatalf("totals %.0f B/s %.0f rec/s, want 1e6 and 1e4", r.BytesPerSec, r.RecordsPerSec)
	}
	if len(r.Keys) != 3 || r.Keys[0].Key != "hot" || r.Keys[1].Key != "warm" {
		t.Fatalf("top keys %+v, want hot then warm", r.Keys)
	}
	if !near(r.Keys[0].RecordsPerSec, 4000, 0.01) || !near(r.Keys[0].Share, 0.4, 0.01) {
		t.Fatalf("hot at %.0f/s (share %.2f), want 4000 (0.4)", r.Keys[0].RecordsPerSec, r.Keys[0].Share)
	}
	// warm may have been evicted early on, so it is an over-estimate by at
	// most its error, and at least its true rate.
	if w := r.Keys[1]; w.RecordsPerSec < 990 || w.RecordsPerSec-w.ErrorPerSec > 1010 {
		t.Fatalf("warm at %.0f/s ± %.0f, want 1000 within its error", w.RecordsPerSec, w.ErrorPerSec)
	}
}

// TestSketchErrorBound checks space-saving's guarantees against exact
// decayed counts on a skewed stream: no key is under-stated, none is
// over-stated by more than its error, every error is at most N/K, and
// every key above N/K is listed.
func TestSketchErrorBound(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := New(2 * time.Second)
			rng := rand.New(rand.NewPCG(seed, 7))
			zipf := rand.NewZipf(rng, 1.2, 1, 199)
			exact := map[string]float64{} // decayed counts in the sketch's landmark weights
			now, first := t0, int64(0)
			for range 20000 {
				now = now.Add(time.Duration(rng.IntN(2000)) * time.Microsecond)
				w := s.Observe(now, 100, 1)
				if first == 0 {
					first = s.landmark
				} else if s.landmark != first { // exact would need rescaling too
					t.Fatal("the landmark moved within this run")
				}
				k := fmt.Sprint("k", zipf.Uint64())
				s.AddKey([]byte(k), w)
				exact[k] += w
			}
			r := s.Report(now, 0)
			f := math.Exp(-float64(now.UnixNano()-s.landmark)/1e9/s.tau) / s.tau / -math.Expm1(-max(float64(now.UnixNano()-s.first)/1e9, 1)/s.tau)
			listed := map[string]KeyRate{}
			for _, kr := range r.Keys {
				listed[kr.Key] = kr
				truth := exact[kr.Key] * f
				if kr.RecordsPerSec < truth*(1-1e-9) || kr.RecordsPerSec-kr.ErrorPerSec > truth*(1+1e-9) {
					t.Fatalf("key %s: %.3f ± %.3f, truth %.3f", kr.Key, kr.RecordsPerSec, kr.ErrorPerSec, truth)
				}
				if kr.ErrorPerSec > r.RecordsPerSec/K*(1+1e-9) {
					t.Fatalf("key %s: error %.3f above N/K %.3f", kr.Key, kr.ErrorPerSec, r.RecordsPerSec/K)
				}
			}
			for k, c := range exact {
				if _, ok := listed[k]; !ok && c*f > r.RecordsPerSec/K {
					t.Fatalf("key %s at %.3f/s, above N/K %.3f, is not listed", k, c*f, r.RecordsPerSec/K)
				}
			}
		})
	}
}

// TestSketchDecaysAndRescales: a key that stops fades with exp(-t/Tau);
// a long idle gap moves the landmark without overflow.
func TestSketchDecaysAndRescales(t *testing.T) {
	s := New(time.Second)
	now := t0
	for range 10000 {
		now = now.Add(time.Millisecond)
		s.AddKey([]byte("a"), s.Observe(now, 10, 1))
	}
	before := s.Report(now, 1).Keys[0].RecordsPerSec
	after := s.Report(now.Add(3*time.Second), 1).Keys[0].RecordsPerSec
	if !near(after, before*math.Exp(-3), 1e-4) { // the young-sketch correction moves by 4e-5 between 10 and 13 Tau
		t.Fatalf("after 3 Tau: %.3f, want %.3f", after, before*math.Exp(-3))
	}
	now = now.Add(1000 * time.Second) // past rescaleAt
	s.AddKey([]byte("b"), s.Observe(now, 10, 1))
	r := s.Report(now, 0)
	if s.landmark != now.UnixNano() || math.IsNaN(r.RecordsPerSec) || math.IsInf(r.RecordsPerSec, 0) || r.Keys[0].Key != "b" {
		t.Fatalf("after a long gap: landmark %d, report %+v", s.landmark, r)
	}
	if !near(r.RecordsPerSec, 1, 1e-6) { // one record of weight 1 over Tau = 1 s
		t.Fatalf("records/s %.6f, want 1", r.RecordsPerSec)
	}
}

// TestSketchYoung: a sketch one second old (a tenth of its Tau) reads a
// steady rate right, not a tenth of it.
func TestSketchYoung(t *testing.T) {
	s := New(10 * time.Second)
	now := t0
	for range 1000 {
		now = now.Add(time.Millisecond)
		s.AddKey([]byte("k"), s.Observe(now, 100, 1))
	}
	if r := s.Report(now, 1); !near(r.RecordsPerSec, 1000, 0.01) || !near(r.Keys[0].RecordsPerSec, 1000, 0.01) {
		t.Fatalf("after 1 s at 1000/s: %.1f/s, key %.1f/s", r.RecordsPerSec, r.Keys[0].RecordsPerSec)
	}
}

func TestPrintable(t *testing.T) {
	long := "a" + strings.Repeat("é", 16) // 33 bytes: the cut lands inside a rune
	for _, c := range []struct {
		key  []byte
		want string
	}{
		{[]byte("user-42"), "user-42"},
		{[]byte{0, 1, 0xff}, "0x0001ff"},
		{[]byte("a\nb"), "0x610a62"},
		{[]byte(long), "a" + strings.Repeat("é", 15)}, // the half rune dropped
	} {
		s := New(time.Second)
		s.AddKey(c.key, s.Observe(t0, 1, 1))
		if got := s.Report(t0, 1).Keys[0]; got.Key != c.want || got.KeyBytes != len(c.key) || got.Truncated != (len(c.key) > KeyPrefix) {
			t.Errorf("%q: %+v, want %q", c.key, got, c.want)
		}
	}
}

// batch builds a v2 record batch of the given keys (nil: a null key),
// compressed with snappy if asked.
func batch(keys [][]byte, compress bool) ([]byte, wal.BatchHeader) {
	var recs []byte
	for i, k := range keys {
		r := kmsg.Record{OffsetDelta: int32(i), Key: k, Value: []byte("value")}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(len(keys) - 1), NumRecords: int32(len(keys)),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, Records: recs}
	if compress {
		rb.Attributes, rb.Records = 2, snappy.Encode(nil, recs)
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	h, err := wal.ParseBatchHeader(raw)
	if err != nil {
		panic(err)
	}
	return raw, h
}

// TestMeterBatches feeds a meter real batches, plain and compressed: the
// plain batches' keys are all counted, the compressed ones' one batch in
// SampleEvery standing for them all.
func TestMeterBatches(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprint("compressed=", compress), func(t *testing.T) {
			var m Meter
			keys := [][]byte{[]byte("hot"), []byte("hot"), []byte("hot"), []byte("cold"), nil}
			raw, h := batch(keys, compress)
			now := t0
			for range 20 * SampleEvery {
				now = now.Add(10 * time.Millisecond) // 100 batches/s: 500 records/s
				m.ObserveBatch(now, h, raw)
			}
			r := m.Report(now, 0)
			if len(r.Keys) != 2 || r.Keys[0].Key != "hot" || r.Keys[1].Key != "cold" {
				t.Fatalf("keys %+v, want hot, cold (null keys left out)", r.Keys)
			}
			if ratio := r.Keys[0].RecordsPerSec / r.Keys[1].RecordsPerSec; !near(ratio, 3, 1e-9) {
				t.Fatalf("hot/cold %.3f, want 3", ratio)
			}
			// The sum over keys is 4/5 of the records: exact for plain
			// batches, within a sample's lag for compressed ones.
			tol := 1e-9
			if compress {
				tol = 0.1
			}
			if sum := r.Keys[0].RecordsPerSec + r.Keys[1].RecordsPerSec; !near(sum, 0.8*r.RecordsPerSec, tol) {
				t.Fatalf("keys sum to %.1f/s of %.1f records/s, want 4/5", sum, r.RecordsPerSec)
			}
		})
	}
}

func TestEachKeyRefusesGarbage(t *testing.T) {
	raw, _ := batch([][]byte{[]byte("a"), nil, {}}, false)
	var got []string
	if !EachKey(raw[wal.BatchHeaderSize:], 3, func(k []byte) { got = append(got, string(k)) }) || fmt.Sprint(got) != "[a ]" {
		t.Fatalf("keys %q", got)
	}
	for cut := wal.BatchHeaderSize; cut < len(raw)-1; cut++ {
		if EachKey(raw[wal.BatchHeaderSize:cut], 3, func([]byte) {}) {
			t.Fatalf("a batch cut at %d parsed whole", cut)
		}
	}
}

// FuzzEachKey: any bytes, no panic; the keys of records kmsg encodes come
// back exactly.
func FuzzEachKey(f *testing.F) {
	raw, _ := batch([][]byte{[]byte("k1"), nil, []byte("key-two")}, false)
	f.Add(raw[wal.BatchHeaderSize:], []byte("x"), 3)
	f.Add([]byte{0x02, 0, 0, 0, 1}, []byte{}, 1)
	f.Fuzz(func(t *testing.T, data, key []byte, n int) {
		n = n % 64
		EachKey(data, n, func([]byte) {})
		var s Sketch
		s.seed, s.tau = New(0).seed, 1
		s.AddKeys(data, n, 1)
		// A valid prefix decodes again the same.
		raw, _ := batch([][]byte{key, key}, false)
		var got [][]byte
		if !EachKey(raw[wal.BatchHeaderSize:], 2, func(k []byte) { got = append(got, k) }) ||
			len(got) != 2 || string(got[0]) != string(key) || string(got[1]) != string(key) {
			t.Fatalf("key %q came back as %q", key, got)
		}
	})
}

// BenchmarkMeterObserveBatch is the produce path's cost per record: a
// batch of 100 records over 10,000 zipf-distributed keys, plain (every key
// read) and snappy (one batch in SampleEvery decompressed and read).
func BenchmarkMeterObserveBatch(b *testing.B) {
	for _, compress := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "snappy"}[compress], func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			zipf := rand.NewZipf(rng, 1.1, 1, 9999)
			var batches [][]byte
			var h wal.BatchHeader
			for range 64 {
				keys := make([][]byte, 100)
				for i := range keys {
					keys[i] = fmt.Appendf(nil, "customer-%06d", zipf.Uint64())
				}
				var raw []byte
				raw, h = batch(keys, compress)
				batches = append(batches, raw)
			}
			var m Meter
			now := t0
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				now = now.Add(time.Millisecond)
				m.ObserveBatch(now, h, batches[i%len(batches)])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/record")
		})
	}
}
