package queue

import (
	"errors"
	"testing"
	"time"
)

// TestStateKeepsTheOperatorRevision: the revision survives the metadata,
// also in a state that holds nothing else, and a lane restored from it
// carries it into its next state; an operator's change raises it.
func TestStateKeepsTheOperatorRevision(t *testing.T) {
	md, err := EncodeState(LaneState{Committed: 4, Op: 2})
	if err != nil || md == "" {
		t.Fatalf("an otherwise empty state with revision 2 encoded as %q (%v)", md, err)
	}
	st, err := DecodeState(md, 4)
	if err != nil || st.Op != 2 {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := EncodeState(LaneState{Op: -1}); err == nil {
		t.Fatal("a negative revision encoded")
	}
	if _, err := DecodeState(StatePrefix+`{"o":-4}`, 0); err == nil {
		t.Fatal("a negative revision decoded")
	}
	l := FromState(OrderPerKeyStrict, st, 10)
	if got := l.State(MaxDoneRanges).Op; got != 2 {
		t.Fatalf("restored lane's revision %d, want 2", got)
	}
	l.OperatorChange()
	l.AdoptOp(1) // never lowers it
	if got := l.State(MaxDoneRanges).Op; got != 3 {
		t.Fatalf("revision %d after an operator's change, want 3", got)
	}
}

// TestCheckCommit: a consumer's state must keep or raise the committed
// revision, an operator's must raise it, and metadata that is not a
// lane's state (a Kafka client's commit, an admin reset) always passes.
func TestCheckCommit(t *testing.T) {
	enc := func(op int64, paused bool) string {
		st := LaneState{Committed: 3, Op: op}
		if paused {
			st.Pauses = []Pause{{Scope: ScopeOf(OrderPerKeyStrict, []byte("A")), First: 3, Since: time.UnixMilli(1)}}
		}
		md, err := EncodeState(st)
		if err != nil {
			t.Fatal(err)
		}
		return md
	}
	cases := []struct {
		name       string
		prev, next string
		own, stale bool
	}{
		{"consumer over its own state", enc(0, true), enc(0, false), false, false},
		{"consumer keeps the operator's revision", enc(1, false), enc(1, true), false, false},
		{"consumer from before the operator's change", enc(1, false), enc(0, true), false, true},
		{"consumer over a Kafka client's commit", "client says hi", enc(0, true), false, false},
		{"consumer over nothing", "", enc(0, true), false, false},
		{"Kafka client over a revised state", enc(5, true), "client says hi", false, false},
		{"empty metadata over a revised state", enc(5, true), "", false, false},
		{"operator raises the revision", enc(1, true), enc(2, false), true, false},
		{"operator keeps the revision", enc(1, true), enc(1, false), true, true},
		{"operator from an old state", enc(2, true), enc(2, false), true, true},
		{"unparsable committed state counts as 0", StatePrefix + "{", enc(0, true), false, false},
		{"unparsable commit counts as 0", enc(1, false), StatePrefix + "{", false, true},
	}
	for _, c := range cases {
		err := CheckCommit(c.prev, c.next, c.own)
		if got := errors.Is(err, ErrStaleState); got != c.stale || (err != nil && !got) {
			t.Errorf("%s: %v, want stale=%v", c.name, err, c.stale)
		}
	}
}
