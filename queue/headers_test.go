package queue

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleMeta() Meta {
	t0 := time.UnixMilli(1_700_000_000_000)
	return Meta{SourceTopic: "orders", SourcePartition: 3, SourceOffset: 42, Group: "billing",
		FirstSeen: t0, Attempt: 2, Due: t0.Add(time.Minute), Tier: 1,
		History: []Failure{{At: t0, Class: "transient", Error: "timeout, upstream"}, {At: t0.Add(time.Second), Class: "transient", Error: "503"}}}
}

func TestHeadersRoundTrip(t *testing.T) {
	m := sampleMeta()
	got, ok, err := Parse(append([]Header{{"message_id", []byte("m1")}}, m.Headers()...))
	if err != nil || !ok || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v %v %v\nwant %+v", got, ok, err, m)
	}
	dead := m
	dead.Tier, dead.DeadReason = -1, "exhausted"
	if got, _, err := Parse(dead.Headers()); err != nil || !reflect.DeepEqual(got, dead) {
		t.Fatalf("dead letter: %+v %v", got, err)
	}
	if _, ok, err := Parse([]Header{{"message_id", []byte("x")}}); ok || err != nil {
		t.Fatal("a source record has retry metadata")
	}
	long := m
	long.History = append([]Failure(nil), m.History...)
	long.History[1].Error = strings.Repeat("é", 400)
	got, _, err = Parse(long.Headers())
	if err != nil || len(got.Last().Error) > MaxErrorBytes || !strings.HasPrefix(long.History[1].Error, got.Last().Error) {
		t.Fatalf("long error: %d bytes, %v", len(got.Last().Error), err)
	}
}

func TestParseRefusals(t *testing.T) {
	set := func(key, value string) []Header {
		hs := sampleMeta().Headers()
		for i := range hs {
			if hs[i].Key == key {
				hs[i].Value = []byte(value)
			}
		}
		return hs
	}
	drop := func(key string) []Header {
		var out []Header
		for _, h := range sampleMeta().Headers() {
			if h.Key != key {
				out = append(out, h)
			}
		}
		return out
	}
	tests := []struct {
		name    string
		headers []Header
		want    string
	}{
		{"missing topic", drop(HeaderSourceTopic), "source.topic is missing"},
		{"bad topic", set(HeaderSourceTopic, "a/b"), "source.topic"},
		{"negative partition", set(HeaderSourcePartition, "-1"), "source.partition"},
		{"offset with sign", set(HeaderSourceOffset, "+4"), "source.offset"},
		{"attempt zero", set(HeaderAttempt, "0"), "attempt"},
		{"attempt beyond history", set(HeaderAttempt, "3"), "history.3 is missing"},
		{"bad class", set(HeaderErrorClass, "Bad"), "error.class"},
		{"last error disagrees", set(HeaderError, "other"), "disagree"},
		{"tier too big", set(HeaderTier, "16"), "tier"},
		{"history malformed", set(HeaderHistoryPrefix+"1", "12"), "history.1"},
		{"history time", set(HeaderHistoryPrefix+"1", "x,transient,e"), "history.1"},
		{"extra history", append(sampleMeta().Headers(), Header{HeaderHistoryPrefix + "7", []byte("1,transient,")}), "history.7"},
		{"leading zero history", append(sampleMeta().Headers(), Header{HeaderHistoryPrefix + "01", []byte("1,transient,")}), "history.01"},
		{"duplicate", append(sampleMeta().Headers(), Header{HeaderGroup, []byte("g")}), "twice"},
		{"not utf8", set(HeaderGroup, "\xff"), "UTF-8"},
		{"tier and dead", append(sampleMeta().Headers(), Header{HeaderDeadReason, []byte("exhausted")}), "not both"},
		{"bad reason", append(drop(HeaderTier), Header{HeaderDeadReason, []byte("tired")}), "dead.reason"},
	}
	for _, tt := range tests {
		_, ok, err := Parse(tt.headers)
		if !ok || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ok %v err %v, want %q", tt.name, ok, err, tt.want)
		}
	}
}

// FuzzParse: Parse never panics, and what it accepts it writes back the
// same (Headers ∘ Parse is the identity on accepted sets, up to order).
func FuzzParse(f *testing.F) {
	enc := func(hs []Header) []byte {
		var b []byte
		for _, h := range hs {
			b = append(b, h.Key...)
			b = append(b, 0)
			b = append(b, h.Value...)
			b = append(b, 0)
		}
		return b
	}
	f.Add(enc(sampleMeta().Headers()))
	dead := sampleMeta()
	dead.Tier, dead.DeadReason = -1, "permanent"
	f.Add(enc(dead.Headers()))
	f.Add([]byte("sluice.retry.attempt\x001\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var hs []Header
		parts := strings.Split(string(data), "\x00")
		for i := 0; i+1 < len(parts); i += 2 {
			hs = append(hs, Header{Key: parts[i], Value: []byte(parts[i+1])})
		}
		m, ok, err := Parse(hs)
		if err != nil || !ok {
			return
		}
		again, ok, err := Parse(m.Headers())
		if err != nil || !ok || !reflect.DeepEqual(again, m) {
			t.Fatalf("accepted %+v, but its headers read back as %+v (%v)", m, again, err)
		}
	})
}
