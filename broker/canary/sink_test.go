package canary

import (
	"testing"
	"time"
)

func TestSinkDedupesAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_700_000_000, 0)
	s, err := OpenSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	dups, err := s.PutBatch([]Put{{"a", Result{0, 1}}, {"b", Result{1, 2}}, {"a", Result{0, 9}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if dups[0] || dups[1] || !dups[2] {
		t.Fatalf("dups %v, want [false false true]", dups)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r, ok := s.Get("a"); !ok || r != (Result{0, 1}) {
		t.Fatalf("a after reopen: %v %v, want the first result", r, ok)
	}
	dups, err = s.PutBatch([]Put{{"b", Result{1, 2}}, {"c", Result{2, 3}}}, now.Add(time.Hour))
	if err != nil || !dups[0] || dups[1] {
		t.Fatalf("after reopen: %v %v", dups, err)
	}
	n, err := s.Prune(now.Add(time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("prune: %d %v, want 2", n, err)
	}
	if _, ok := s.Get("a"); ok {
		t.Fatal("a survived its prune")
	}
	if _, ok := s.Get("c"); !ok {
		t.Fatal("c was pruned")
	}
}

func FuzzParseValue(f *testing.F) {
	f.Add([]byte(`{"id":"a-1-2-3","sent_ns":1}`))
	f.Add([]byte(`{"id":""}`))
	f.Add([]byte(`not json`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseValue(b)
		if err == nil && v.ID == "" {
			t.Fatal("accepted a value without an id")
		}
	})
}

func TestDecodeResultRefusesWrongLength(t *testing.T) {
	if _, _, err := decodeResult(make([]byte, 19)); err == nil {
		t.Fatal("19 bytes decoded")
	}
	r, at, err := decodeResult(encodeResult(Result{-1, 1 << 40}, time.Unix(0, 42)))
	if err != nil || r != (Result{-1, 1 << 40}) || at.UnixNano() != 42 {
		t.Fatalf("round trip: %v %v %v", r, at, err)
	}
}
