package queue

// This file owns a lane's durable state and its encoding in the metadata
// of the group's offset commit (doc.go, "Strict order: pauses", draws it).
//
// Invariant: EncodeState's output is at most MaxStateBytes and starts with
// StatePrefix; DecodeState accepts exactly what EncodeState writes (after a
// trim of done ranges) and refuses anything else with a precise error,
// never panicking (FuzzDecodeState). Trimming drops done ranges from the
// highest down, never a pause: a dropped range only redelivers.
// Invariant: a state whose operator revision is above 0 encodes it even
// when it holds nothing else, so no commit forgets the revision
// (CheckCommit relies on it).

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// StatePrefix starts the commit metadata of a queue lane; metadata without
// it (a Kafka client's commit) is no state.
const StatePrefix = "sluice.queue/1 "

// MaxStateBytes is the commit metadata's bound (Kafka's
// offset.metadata.max.bytes).
const MaxStateBytes = 4096

// MaxDoneRanges bounds the done ranges a state keeps.
const MaxDoneRanges = 64

// Range is the offsets [From, To).
type Range struct{ From, To int64 }

// LaneState is what survives a restart of a lane.
type LaneState struct {
	Committed int64
	Done      []Range // done offsets above Committed, increasing, disjoint
	Pauses    []Pause
	// Op is the operator revision: how many times an operator
	// (keys:resume, keys:skip) changed the state. A consumer's commit
	// carries the revision of the state it started from (CheckCommit).
	Op int64
}

type stateJSON struct {
	Done   [][2]int64  `json:"d,omitempty"`
	Pauses []pauseJSON `json:"p,omitempty"`
	Op     int64       `json:"o,omitempty"`
}

type pauseJSON struct {
	Scope string `json:"s"` // base64 of the scope id
	First int64  `json:"f"`
	Since int64  `json:"t"`           // unix ms
	Class string `json:"c,omitempty"` // the nack's error class
	// A pause its client retries by itself (Pause.Attempts, Pause.Due).
	Attempts int   `json:"a,omitempty"`
	Due      int64 `json:"u,omitempty"` // unix ms
}

// EncodeState writes st's done ranges and pauses as commit metadata (the
// committed offset is the commit's own offset). An empty state is "".
func EncodeState(st LaneState) (string, error) {
	if len(st.Done) == 0 && len(st.Pauses) == 0 && st.Op == 0 {
		return "", nil
	}
	if st.Op < 0 {
		return "", fmt.Errorf("queue state: negative operator revision %d", st.Op)
	}
	if len(st.Pauses) > MaxPauses {
		return "", fmt.Errorf("%w: %d, at most %d", ErrPauseLimit, len(st.Pauses), MaxPauses)
	}
	sj := stateJSON{Op: st.Op}
	for _, p := range st.Pauses {
		pj := pauseJSON{Scope: base64.StdEncoding.EncodeToString([]byte(p.Scope)), First: p.First, Since: p.Since.UnixMilli(), Class: p.Class}
		if p.Attempts > 0 {
			pj.Attempts, pj.Due = p.Attempts, p.Due.UnixMilli()
		}
		sj.Pauses = append(sj.Pauses, pj)
	}
	done := st.Done
	if len(done) > MaxDoneRanges {
		done = done[:MaxDoneRanges]
	}
	for {
		sj.Done = sj.Done[:0]
		for _, r := range done {
			sj.Done = append(sj.Done, [2]int64{r.From, r.To})
		}
		b, err := json.Marshal(sj)
		if err != nil {
			return "", err
		}
		if len(StatePrefix)+len(b) <= MaxStateBytes {
			return StatePrefix + string(b), nil
		}
		if len(done) == 0 {
			return "", fmt.Errorf("queue state of %d bytes over %d", len(b), MaxStateBytes)
		}
		done = done[:len(done)/2]
	}
}

// DecodeState reads commit metadata at committed offset committed. The
// metadata of a commit that is not a lane's ("" or another client's) is
// an empty state.
func DecodeState(metadata string, committed int64) (LaneState, error) {
	st := LaneState{Committed: committed}
	if !strings.HasPrefix(metadata, StatePrefix) {
		return st, nil
	}
	if len(metadata) > MaxStateBytes {
		return st, fmt.Errorf("queue state of %d bytes over %d", len(metadata), MaxStateBytes)
	}
	dec := json.NewDecoder(strings.NewReader(metadata[len(StatePrefix):]))
	dec.DisallowUnknownFields()
	var sj stateJSON
	if err := dec.Decode(&sj); err != nil {
		return st, fmt.Errorf("queue state: %w", err)
	}
	if dec.More() {
		return st, fmt.Errorf("queue state: data after the object")
	}
	if sj.Op < 0 {
		return st, fmt.Errorf("queue state: negative operator revision %d", sj.Op)
	}
	st.Op = sj.Op
	prev := committed
	for i, r := range sj.Done {
		if r[0] < prev || r[1] <= r[0] {
			return st, fmt.Errorf("queue state: done range %d [%d,%d) is not increasing above %d", i, r[0], r[1], prev)
		}
		st.Done = append(st.Done, Range{r[0], r[1]})
		prev = r[1]
	}
	if len(sj.Pauses) > MaxPauses {
		return st, fmt.Errorf("queue state: %d pauses, at most %d", len(sj.Pauses), MaxPauses)
	}
	seen := map[string]bool{}
	for i, p := range sj.Pauses {
		scope, err := base64.StdEncoding.DecodeString(p.Scope)
		switch {
		case err != nil:
			return st, fmt.Errorf("queue state: pause %d: scope: %w", i, err)
		case !validScope(string(scope)):
			return st, fmt.Errorf("queue state: pause %d: %q is not a scope id", i, scope)
		case seen[string(scope)]:
			return st, fmt.Errorf("queue state: pause %d: scope paused twice", i)
		case p.Class != "" && ValidateClass(p.Class) != nil:
			return st, fmt.Errorf("queue state: pause %d: %w", i, ValidateClass(p.Class))
		case p.First < committed:
			return st, fmt.Errorf("queue state: pause %d: first held offset %d below the committed offset %d", i, p.First, committed)
		case p.Attempts < 0 || p.Attempts > MaxAttempts:
			return st, fmt.Errorf("queue state: pause %d: attempts %d out of 0..%d", i, p.Attempts, MaxAttempts)
		case (p.Attempts == 0) != (p.Due == 0):
			return st, fmt.Errorf("queue state: pause %d: attempts (a) and due time (u) come together", i)
		case p.Due < 0:
			return st, fmt.Errorf("queue state: pause %d: negative due time %d", i, p.Due)
		}
		seen[string(scope)] = true
		ps := Pause{Scope: string(scope), First: p.First, Since: time.UnixMilli(p.Since), Class: p.Class, Attempts: p.Attempts}
		if p.Attempts > 0 {
			ps.Due = time.UnixMilli(p.Due)
		}
		st.Pauses = append(st.Pauses, ps)
	}
	return st, nil
}

// validScope checks a scope id's form (ScopeOf).
func validScope(s string) bool {
	switch {
	case s == scopePartition, s == scopeNilKey:
		return true
	case s[0] == 'k':
		return len(s)-1 <= MaxScopeKey
	case s[0] == 'h':
		return len(s) == 1+32
	}
	return false
}

// ScopeKey is a scope's key for display: the key (verbatim when it was
// short enough), or its SHA-256 for a long one; partition and nilKey say
// the other two forms.
func ScopeKey(scope string) (key []byte, sha256 []byte, partition, nilKey bool) {
	switch {
	case scope == scopePartition:
		return nil, nil, true, false
	case scope == scopeNilKey:
		return nil, nil, false, true
	case scope[0] == 'k':
		return []byte(scope[1:]), nil, false, false
	}
	return nil, []byte(scope[1:]), false, false
}
