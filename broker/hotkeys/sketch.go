package hotkeys

// This file owns Sketch, the pure core: the space-saving table over
// forward-decayed weights and the ingress totals beside it. It does no I/O
// and reads no clock; callers pass the time in. Not safe for concurrent
// use (Meter adds the lock).
//
// Invariant: at most K counters; each keeps at most KeyPrefix key bytes.
// Invariant: for every counter, 0 <= err <= count, and err is at most the
// table's total decayed records divided by K.

import (
	"encoding/hex"
	"hash/maphash"
	"math"
	"slices"
	"time"
	"unicode/utf8"
)

const (
	// K is the number of counters of a sketch: the table's size, and the
	// 1/K share of records above which a key is always listed.
	K = 16
	// KeyPrefix is how many bytes of a key are kept to show it.
	KeyPrefix = 32
	// DefaultTau is the decay time constant of a Meter's sketch.
	DefaultTau = 10 * time.Second
	// rescaleAt is the exponent past which the landmark moves forward:
	// exp(64) is about 6e27, far below float64's range even summed over
	// every record a partition could take in one Tau.
	rescaleAt = 64.0
)

// Sketch is a space-saving top-K table of keys by decayed record counts,
// with the decayed ingress bytes and records of everything observed.
type Sketch struct {
	seed     maphash.Seed
	tau      float64 // seconds
	landmark int64   // unix nanoseconds; weights are exp((t-landmark)/tau)
	first    int64   // unix nanoseconds of the first observation
	started  bool    // landmark and first are set
	bytes    float64 // decayed totals, in landmark weights
	records  float64
	n        int // counters in use
	c        [K]counter
}

type counter struct {
	hash   uint64
	count  float64 // decayed records, an over-estimate by at most err
	err    float64
	keyLen int // the key's full length
	nkey   uint8
	key    [KeyPrefix]byte
}

// New returns an empty sketch whose rates answer to changes within about
// tau (DefaultTau if tau <= 0).
func New(tau time.Duration) *Sketch {
	if tau <= 0 {
		tau = DefaultTau
	}
	return &Sketch{seed: maphash.MakeSeed(), tau: tau.Seconds()}
}

// Observe adds bytes and records arriving at now to the totals and returns
// the weight one record arriving at now carries, for AddKey.
func (s *Sketch) Observe(now time.Time, bytes, records int) float64 {
	w := s.weight(now)
	s.bytes += float64(bytes) * w
	s.records += float64(records) * w
	return w
}

// weight is exp((now-landmark)/tau), moving the landmark to now first
// (scaling every count down by the same factor) when the exponent grows
// past rescaleAt. A clock that steps back gives a weight below one, which
// is harmless.
func (s *Sketch) weight(now time.Time) float64 {
	t := now.UnixNano()
	if !s.started {
		s.landmark, s.first, s.started = t, t, true
	}
	x := float64(t-s.landmark) / 1e9 / s.tau
	if x > rescaleAt {
		f := math.Exp(-x)
		s.bytes *= f
		s.records *= f
		for i := range s.n {
			s.c[i].count *= f
			s.c[i].err *= f
		}
		s.landmark, x = t, 0
	}
	return math.Exp(x)
}

// AddKey counts w (a weight from Observe, times how many records this one
// stands for) for key: its counter grows, or, with the table full, the
// smallest counter is taken over and its count kept as the new key's
// possible over-estimate (space-saving).
func (s *Sketch) AddKey(key []byte, w float64) {
	h := maphash.Bytes(s.seed, key)
	for i := range s.n {
		if s.c[i].hash == h {
			s.c[i].count += w
			return
		}
	}
	if s.n < K {
		s.c[s.n].set(h, key, w, 0)
		s.n++
		return
	}
	m := 0
	for i := 1; i < K; i++ {
		if s.c[i].count < s.c[m].count {
			m = i
		}
	}
	low := s.c[m].count
	s.c[m].set(h, key, low+w, low)
}

func (c *counter) set(h uint64, key []byte, count, err float64) {
	c.hash, c.count, c.err, c.keyLen = h, count, err, len(key)
	c.nkey = uint8(copy(c.key[:], key))
}

// Report is a partition's ingress at one moment.
type Report struct {
	BytesPerSec   float64 `json:"bytes_per_sec"`
	RecordsPerSec float64 `json:"records_per_sec"`
	// Keys are the hottest keys, highest rate first (at most K).
	Keys []KeyRate `json:"keys"`
}

// TopicReport is a topic's ingress as GET /v1/topics/{topic}/hot-keys
// answers it.
type TopicReport struct {
	Topic string `json:"topic"`
	// WindowSeconds is the decay time constant of the rates; Counters the
	// sketch's size, so a listed rate is over by at most records_per_sec
	// divided by Counters.
	WindowSeconds float64           `json:"window_seconds"`
	Counters      int               `json:"counters"`
	Partitions    []PartitionReport `json:"partitions"`
}

// PartitionReport is one partition's ingress, or why its leader could
// not tell (Error, with the figures zero).
type PartitionReport struct {
	Partition int32 `json:"partition"`
	Leader    int32 `json:"leader"`
	Report
	Error string `json:"error,omitempty"`
}

// KeyRate is one key's estimated rate.
type KeyRate struct {
	// Key is the key's first KeyPrefix bytes as text when they are valid
	// UTF-8, otherwise "0x" and their hex; Truncated says bytes were cut.
	Key       string `json:"key"`
	KeyBytes  int    `json:"key_bytes"` // the key's full length
	Truncated bool   `json:"truncated,omitempty"`
	// RecordsPerSec over-states the key's true rate by at most
	// ErrorPerSec (space-saving's bound).
	RecordsPerSec float64 `json:"records_per_sec"`
	ErrorPerSec   float64 `json:"error_per_sec"`
	// Share is RecordsPerSec over the partition's records per second.
	Share float64 `json:"share"`
}

// Report reads the rates at now, at most top keys (all K if top <= 0).
func (s *Sketch) Report(now time.Time, top int) Report {
	if !s.started {
		return Report{Keys: []KeyRate{}}
	}
	// A count in landmark weights decays to count*exp(-(now-L)/tau) at
	// now; divided by tau it is a rate. A sketch younger than a few tau
	// has not filled yet (a steady r reads r*(1-exp(-age/tau))): dividing
	// by that share reads r from the first second on.
	f := math.Exp(-float64(now.UnixNano()-s.landmark)/1e9/s.tau) / s.tau
	// The age counts as at least a second, so one record just seen does
	// not read as a burst of thousands per second.
	age := max(float64(now.UnixNano()-s.first)/1e9, 1) / s.tau
	f /= -math.Expm1(-age)
	r := Report{BytesPerSec: s.bytes * f, RecordsPerSec: s.records * f, Keys: make([]KeyRate, 0, s.n)}
	for i := range s.n {
		c := &s.c[i]
		k := KeyRate{Key: Printable(cutRune(c.key[:c.nkey], c.keyLen > int(c.nkey))), KeyBytes: c.keyLen, Truncated: c.keyLen > int(c.nkey),
			RecordsPerSec: c.count * f, ErrorPerSec: c.err * f}
		if r.RecordsPerSec > 0 {
			k.Share = min(1, k.RecordsPerSec/r.RecordsPerSec)
		}
		r.Keys = append(r.Keys, k)
	}
	slices.SortFunc(r.Keys, func(a, b KeyRate) int {
		switch {
		case a.RecordsPerSec > b.RecordsPerSec:
			return -1
		case a.RecordsPerSec < b.RecordsPerSec:
			return 1
		}
		return 0
	})
	if top > 0 && len(r.Keys) > top {
		r.Keys = r.Keys[:top]
	}
	return r
}

// Printable shows key bytes as text when they are valid UTF-8 without
// control characters, otherwise as "0x" and their hex.
func Printable(b []byte) string {
	if utf8.Valid(b) {
		ok := true
		for _, r := range string(b) {
			if r < 0x20 || r == 0x7f {
				ok = false
				break
			}
		}
		if ok {
			return string(b)
		}
	}
	return "0x" + hex.EncodeToString(b)
}

// cutRune drops a UTF-8 sequence that the KeyPrefix cut left incomplete at
// the end of a truncated key, so a text key stays text; bytes that are not
// text either way are left whole (Printable shows them as hex).
func cutRune(b []byte, truncated bool) []byte {
	if !truncated || utf8.Valid(b) {
		return b
	}
	for cut := 1; cut < utf8.UTFMax && cut <= len(b); cut++ {
		if utf8.Valid(b[:len(b)-cut]) {
			return b[:len(b)-cut]
		}
	}
	return b
}
