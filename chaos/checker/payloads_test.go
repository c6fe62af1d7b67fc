package checker

import (
	"strings"
	"testing"
)

func TestCheckPayloads(t *testing.T) {
	good := PayloadRun{
		Acked:     []AckedPayload{{Ref: "a", SHA256: "s1", Size: 10, Partition: 0, Offset: 3}, {Ref: "b", SHA256: "s2", Size: 20, Partition: 1, Offset: 0}},
		Orphans:   []string{"o"},
		Log:       map[int32]map[int64]string{0: {2: "", 3: "a"}, 1: {0: "b"}},
		Reads:     map[string]PayloadRead{"a": {Size: 10, SHA256: "s1"}, "b": {Size: 20, SHA256: "s2"}},
		Committed: map[int32]int64{0: 4, 1: 1},
		Verified:  map[string]bool{"a": true, "b": true},
	}
	if got := CheckPayloads(good); len(got) != 0 {
		t.Fatalf("a clean run: %v", got)
	}
	for _, c := range []struct {
		name, want string
		mutate     func(r *PayloadRun)
	}{
		{"lost from the log", "payload-lost: a", func(r *PayloadRun) { r.Log[0][3] = "" }},
		{"unreadable", "payload-lost: b", func(r *PayloadRun) { r.Reads["b"] = PayloadRead{Err: "not found"} }},
		{"not read", "payload-lost: b", func(r *PayloadRun) { delete(r.Reads, "b") }},
		{"corrupt", "payload-corrupt: a", func(r *PayloadRun) { r.Reads["a"] = PayloadRead{Size: 10, SHA256: "zz"} }},
		{"orphan published", "orphan-published: o", func(r *PayloadRun) { r.Log[1][5] = "o" }},
		{"commit past", "commit-past-unverified: partition 0", func(r *PayloadRun) { r.Verified["a"] = false }},
	} {
		r := good
		r.Log = map[int32]map[int64]string{0: {2: "", 3: "a"}, 1: {0: "b"}}
		r.Reads = map[string]PayloadRead{"a": {Size: 10, SHA256: "s1"}, "b": {Size: 20, SHA256: "s2"}}
		r.Verified = map[string]bool{"a": true, "b": true}
		c.mutate(&r)
		got := CheckPayloads(r)
		if len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
			t.Errorf("%s: %v, want one %q", c.name, got, c.want)
		}
	}
	// A commit at the envelope's offset (not past it) is fine unverified.
	r := good
	r.Verified = map[string]bool{"b": true}
	r.Committed = map[int32]int64{0: 3, 1: 1}
	if got := CheckPayloads(r); len(got) != 0 {
		t.Fatalf("commit at the unverified envelope: %v", got)
	}
}
