package queue

// This file owns the rule that keeps an operator's change of a lane's
// state (keys:resume, keys:skip) from being overwritten by a consumer
// that had not seen it yet. Two writers commit a strict partition's state:
// the consumer that holds the partition (the broker's HTTP queue, or the
// Go helper inside a Kafka client), and the operator through the
// coordinator (Coordinator.CommitOwn). The consumer's copy of the state
// is always a little old, so without a check its next commit would bring
// back a pause the operator had just lifted.
//
// Invariant: the operator revision (LaneState.Op) of a partition's
// durable state never goes down while a lane's state is committed over a
// lane's state, and every operator commit raises it; so a consumer commit
// built from a state older than the last operator change is refused
// (ErrStaleState), and the consumer reads the durable state again and
// redoes its change over it.
// Invariant: a commit whose metadata is not a lane's state (a Kafka
// client's own commit, an offset reset by an admin tool) is never refused
// here: it is not a lane's and replaces the state whole, as in Kafka.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrStaleState refuses a consumer's commit of a lane's state built from
// a state an operator changed since (its operator revision is older), and
// an operator's commit that does not raise the revision (two operators at
// once). The writer reads the committed state again and retries.
var ErrStaleState = errors.New("the group's committed state changed since it was read (an operator resumed or skipped a pause)")

// StateOp is the operator revision of commit metadata, and whether the
// metadata is a lane's state at all. Metadata with the prefix that does
// not parse has revision 0.
func StateOp(metadata string) (op int64, isState bool) {
	if !strings.HasPrefix(metadata, StatePrefix) {
		return 0, false
	}
	var v struct {
		Op int64 `json:"o"`
	}
	if err := json.Unmarshal([]byte(metadata[len(StatePrefix):]), &v); err != nil || v.Op < 0 {
		return 0, true
	}
	return v.Op, true
}

// CheckCommit decides whether a commit whose metadata is next may replace
// the committed metadata prev. own is true for an operator's commit
// (keys:resume, keys:skip), which must raise the operator revision; a
// consumer's commit must keep it or raise it.
func CheckCommit(prev, next string, own bool) error {
	nextOp, isState := StateOp(next)
	if !isState {
		return nil
	}
	prevOp, _ := StateOp(prev)
	switch {
	case own && nextOp <= prevOp:
		return fmt.Errorf("%w: operator revision %d, the committed one is %d", ErrStaleState, nextOp, prevOp)
	case !own && nextOp < prevOp:
		return fmt.Errorf("%w: the commit's operator revision is %d, the committed one %d; read the committed state again", ErrStaleState, nextOp, prevOp)
	}
	return nil
}
