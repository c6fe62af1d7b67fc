package queue

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// deadLetter is the headers of a dead letter of source partition sp, dead
// at unix ms at, whose last failure has class class.
func deadLetter(sp int32, at int64, class string) []Header {
	m := sampleMeta()
	m.SourcePartition = sp
	m.Tier, m.DeadReason = -1, "exhausted"
	m.Due = time.UnixMilli(at)
	m.History[len(m.History)-1].Class = class
	return append([]Header{{"message_id", []byte("m1")}, {"h", []byte("v")}}, m.Headers()...)
}

func TestRedriveScopeMatch(t *testing.T) {
	hs := deadLetter(1, 5000, "transient")
	cases := []struct {
		name  string
		s     RedriveScope
		off   int64
		ts    int64
		key   []byte
		hs    []Header
		match bool
	}{
		{"everything", RedriveScope{}, 0, 1, nil, nil, true},
		{"below from offset", RedriveScope{FromOffset: 10}, 9, 1, nil, hs, false},
		{"at from offset", RedriveScope{FromOffset: 10}, 10, 1, nil, hs, true},
		{"to offset exclusive", RedriveScope{ToOffset: 10}, 10, 1, nil, hs, false},
		{"time from due header", RedriveScope{FromMs: 5000, ToMs: 5001}, 0, 1, nil, hs, true},
		{"time exclusive end", RedriveScope{FromMs: 4000, ToMs: 5000}, 0, 9999, nil, hs, false},
		{"time from timestamp without headers", RedriveScope{FromMs: 100, ToMs: 200}, 0, 150, nil, nil, true},
		{"key equal", RedriveScope{HasKey: true, Key: []byte("k")}, 0, 1, []byte("k"), hs, true},
		{"key differs", RedriveScope{HasKey: true, Key: []byte("k")}, 0, 1, []byte("x"), hs, false},
		{"empty key is a key, nil is none", RedriveScope{HasKey: true, Key: []byte{}}, 0, 1, nil, hs, false},
		{"class", RedriveScope{Class: "transient"}, 0, 1, nil, hs, true},
		{"class differs", RedriveScope{Class: "permanent"}, 0, 1, nil, hs, false},
		{"class without headers", RedriveScope{Class: "transient"}, 0, 1, nil, nil, false},
	}
	for _, c := range cases {
		if got := c.s.Match(c.off, c.ts, c.key, c.hs); got != c.match {
			t.Errorf("%s: Match = %v, want %v", c.name, got, c.match)
		}
	}
}

func TestRedriveScopeValidateAndFreeze(t *testing.T) {
	for _, bad := range []RedriveScope{{FromOffset: -1}, {FromOffset: 5, ToOffset: 5}, {FromMs: 9, ToMs: 3}, {Class: "Bad Class"}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	s := RedriveScope{FromOffset: 3, ToOffset: 10}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := s.Ends(map[int32]int64{0: 7, 1: 20}); !reflect.DeepEqual(got, map[int32]int64{0: 7, 1: 10}) {
		t.Fatalf("ends %v", got)
	}
	if s.Start(0) != 3 || s.Start(5) != 5 {
		t.Fatalf("start %d %d", s.Start(0), s.Start(5))
	}
	if !RedriveDone(map[int32]int64{0: 7, 1: 10}, map[int32]int64{0: 7, 1: 10}) || RedriveDone(map[int32]int64{0: 7}, map[int32]int64{0: 7, 1: 10}) {
		t.Fatal("RedriveDone")
	}
}

func TestRedrivePartitionAndHeaders(t *testing.T) {
	hs := deadLetter(5, 1, "transient")
	if p := RedrivePartition(hs, 0, 8); p != 5 {
		t.Fatalf("source partition: %d", p)
	}
	if p := RedrivePartition(hs, 0, 4); p != 1 {
		t.Fatalf("modulo: %d", p)
	}
	if p := RedrivePartition(nil, 3, 2); p != 1 {
		t.Fatalf("no headers: %d", p)
	}
	out := RedriveHeaders(append(hs, Header{HeaderRedriveSource, []byte("old/0/0")}), "job-1", 2, 77)
	var keys []string
	for _, h := range out {
		keys = append(keys, h.Key)
	}
	if strings.Join(keys, ",") != "message_id,h,"+HeaderRedriveSource || string(out[2].Value) != "job-1/2/77" {
		t.Fatalf("headers %v", out)
	}
	if o, ok := RedrivenOffset(out, "job-1", 2); !ok || o != 77 {
		t.Fatalf("RedrivenOffset %d %v", o, ok)
	}
	if _, ok := RedrivenOffset(out, "job-1", 3); ok {
		t.Fatal("another partition's copy counted")
	}
	if _, ok := RedrivenOffset(out, "job-2", 2); ok {
		t.Fatal("another job's copy counted")
	}
}

func TestParseRedriveSource(t *testing.T) {
	j, p, o, err := ParseRedriveSource(RedriveSource("abc-1", 3, 99))
	if err != nil || j != "abc-1" || p != 3 || o != 99 {
		t.Fatalf("%q %d %d %v", j, p, o, err)
	}
	for _, bad := range []string{"", "a/1", "a/1/2/3", "A/1/2", "a/-1/2", "a/1/x", "a/01/2", "a/1/+2", "/1/2", "a/99999999999/1"} {
		if _, _, _, err := ParseRedriveSource(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseRedriveSource(f *testing.F) {
	for _, s := range []string{"abc-1/3/99", "a/0/0", "", "a//1", "a/1/99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		j, p, o, err := ParseRedriveSource(v)
		if err != nil {
			return
		}
		if RedriveSource(j, p, o) != v {
			t.Fatalf("%q parses to (%q, %d, %d), written back as %q", v, j, p, o, RedriveSource(j, p, o))
		}
	})
}
