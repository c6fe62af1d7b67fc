package e2e

// This file owns the record of a consumer group's offset commits as its
// members' clients saw them (what each sent, when, and how it ended), and
// the judgement of a committed offset that a sample shows below a higher
// one seen earlier.
//
// A committed offset may go down legitimately. Kafka's coordinator (and
// Sluice's, broker/group's CheckCommit) accepts an OffsetCommit from a
// member of the current generation whatever its offset, and the classic
// protocol never checks that the member owns the partition; only a commit
// of an ended generation or an unknown member is refused. franz-go (v1.22)
// makes use of that after a coordinator failover: a member whose JoinGroup
// is answered UNKNOWN_MEMBER_ID rejoins as a new member but keeps, as a
// cooperative member, the partitions and uncommitted offsets of its old
// generation, still fetching them; once it is a member of the new
// generation its commit of those old offsets is accepted, even though
// another member was given the partitions meanwhile and committed further.
// It then gives the partitions up, and their new owner commits further
// again.
//
// What may never happen is a value no commit can explain: a sample that
// shows offset o on partition p below the highest seen there, where no
// commit of o on p could have been applied after the sample before it
// (which showed another value) was sent and before the sample itself was
// answered. A commit is applied, if at all, after it is sent and before
// its client learns how it ended: accepted, or failed otherwise than by a
// refusal (a coordinator killed with SIGKILL, as here, ends its commits
// when it dies); a refused commit is never applied. An acknowledged commit
// that is lost, or a value read from a stale copy, is such a value; so is a
// refused commit applied all the same. Only client-side times are known,
// so a loss within one sample's round trip of the commit that wrote the
// value may pass unseen.
//
// Invariant: a commitRecord is appended when its request is sent and only
// its outcome and answeredAt change afterwards, under commitLog.mu.

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitOutcome is how a commit ended, as its client saw it.
type commitOutcome int8

const (
	commitInFlight commitOutcome = iota // sent, no answer yet: may be applied
	commitOK                            // accepted: applied before its answer
	commitRefused                       // refused by the generation check, which comes before any write
	commitUnknown                       // failed otherwise (timeout, coordinator gone): may be applied
)

func (o commitOutcome) String() string {
	return [...]string{"in flight", "ok", "refused", "unknown"}[o]
}

// commitOutcomeOf classifies a commit's error. Only the refusals of the
// coordinator's generation and membership check are sure to have written
// nothing; anything else may have been written before it failed.
func commitOutcomeOf(err error) commitOutcome {
	switch {
	case err == nil:
		return commitOK
	case errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.UnknownMemberID),
		errors.Is(err, kerr.RebalanceInProgress), errors.Is(err, kerr.FencedInstanceID):
		return commitRefused
	}
	return commitUnknown
}

// commitRecord is one OffsetCommit a member sent.
type commitRecord struct {
	member     string          // the client id
	generation int32           // as sent
	offsets    map[int32]int64 // partition → offset, of the watched topic
	sentAt     time.Time       // just before the request was issued
	answeredAt time.Time       // guarded by commitLog.mu; zero while in flight
	outcome    commitOutcome   // guarded by commitLog.mu
}

// commitLog is every commit the members of one group sent.
type commitLog struct {
	mu      sync.Mutex
	commits []*commitRecord // guarded by mu
}

// sent records req, about to be issued by member; only the partitions of
// topic are kept.
func (l *commitLog) sent(member, topic string, req *kmsg.OffsetCommitRequest) *commitRecord {
	c := &commitRecord{member: member, generation: req.Generation, offsets: map[int32]int64{}, sentAt: time.Now()}
	for _, t := range req.Topics {
		if t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			c.offsets[p.Partition] = p.Offset
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commits = append(l.commits, c)
	return c
}

// done records how c ended.
func (l *commitLog) done(c *commitRecord, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.answeredAt = time.Now()
	c.outcome = commitOutcomeOf(err)
}

// offsetDrop is a sample that showed a committed offset below the highest
// seen on its partition, and other than the one the partition's previous
// sample showed.
type offsetDrop struct {
	partition        int32
	offset           int64     // shown by the sample
	high             int64     // the highest shown before
	prev             int64     // shown by the previous sample of the partition
	prevSentAt       time.Time // when that previous sample was sent
	answeredAt       time.Time // when this sample was answered
	sample           int
	intoTest         time.Duration
	excusedBy        *commitRecord // set by judge
	excusedByOutcome commitOutcome // set by judge
}

func (d offsetDrop) String() string {
	s := fmt.Sprintf("partition %d: committed offset %d after %d (the sample before showed %d; sample %d, %v into the test)",
		d.partition, d.offset, d.high, d.prev, d.sample, d.intoTest.Round(time.Millisecond))
	if c := d.excusedBy; c != nil {
		s += fmt.Sprintf(": written by %s's commit of generation %d (%s, sent %v before this sample's answer)",
			c.member, c.generation, d.excusedByOutcome, d.answeredAt.Sub(c.sentAt).Round(time.Millisecond))
	}
	return s
}

// judge splits drops into those a commit explains (excusedBy set) and
// those none does: a commit of d.offset on d.partition, sent before the
// sample was answered, still in flight, or not refused and ended after the
// previous sample was sent.
func (l *commitLog) judge(drops []offsetDrop) (excused, unexplained []offsetDrop) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range drops {
		for _, c := range l.commits {
			o, ok := c.offsets[d.partition]
			if !ok || o != d.offset || !c.sentAt.Before(d.answeredAt) {
				continue
			}
			if c.outcome == commitInFlight ||
				(c.outcome != commitRefused && c.answeredAt.After(d.prevSentAt)) {
				d.excusedBy, d.excusedByOutcome = c, c.outcome
				break
			}
		}
		if d.excusedBy != nil {
			excused = append(excused, d)
		} else {
			unexplained = append(unexplained, d)
		}
	}
	return excused, unexplained
}

// TestCommitLogJudge: the judgement on hand-made histories, among them the
// one TestClusterGroupCoordinatorKilledDuringRebalance met (a new member
// committing its old generation's offsets once in the new generation) and
// the ones it exists to catch (an acknowledged commit lost, a stale value
// read back, a refused commit applied).
func TestCommitLogJudge(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	commit := func(member string, gen int32, p int32, off int64, sent, answered int, outcome commitOutcome) *commitRecord {
		return &commitRecord{member: member, generation: gen, offsets: map[int32]int64{p: off},
			sentAt: at(sent), answeredAt: at(answered), outcome: outcome}
	}
	// Partition 2 showed 1430 (member-2, generation 2) in a sample sent at
	// 1000 ms, then 47 in one answered at 1200 ms.
	drop := offsetDrop{partition: 2, offset: 47, high: 1430, prev: 1430, prevSentAt: at(1000), answeredAt: at(1200)}
	history := []*commitRecord{
		commit("member-3", 1, 2, 34, 0, 10, commitOK),      // at the killed coordinator
		commit("member-2", 2, 2, 1430, 900, 950, commitOK), // the partition's new owner
	}
	tests := []struct {
		name    string
		commits []*commitRecord
		excused bool
	}{
		{"an old owner's commit accepted in the new generation after the higher one", append(history,
			commit("member-3", 3, 2, 47, 1050, 1100, commitOK)), true},
		{"the old owner's commit still in flight", append(history,
			commit("member-3", 3, 2, 47, 1050, 0, commitInFlight)), true},
		{"the old owner's commit of unknown outcome", append(history,
			commit("member-3", 3, 2, 47, 1050, 1100, commitUnknown)), true},
		{"a commit of unknown outcome that ended before 1430 was seen", append(history,
			commit("member-3", 1, 2, 47, 100, 400, commitUnknown)), false},
		{"an acknowledged commit lost: 47 was acknowledged before 1430 was seen", append(history,
			commit("member-3", 1, 2, 47, 20, 30, commitOK)), false},
		{"a refused commit applied", append(history,
			commit("member-3", 2, 2, 47, 1050, 1100, commitRefused)), false},
		{"a commit sent only after the sample was answered", append(history,
			commit("member-3", 3, 2, 47, 1300, 1350, commitOK)), false},
		{"the value of another partition's commit", append(history,
			commit("member-3", 3, 3, 47, 1050, 1100, commitOK)), false},
		{"no commit of the value at all", history, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &commitLog{commits: tt.commits}
			excused, unexplained := l.judge([]offsetDrop{drop})
			if got := len(excused) == 1; got != tt.excused || len(excused)+len(unexplained) != 1 {
				t.Fatalf("excused %v, unexplained %v; want excused: %v", excused, unexplained, tt.excused)
			}
		})
	}
}

// TestCommitOutcomeOf: only the generation check's refusals are sure not
// to have been written.
func TestCommitOutcomeOf(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want commitOutcome
	}{
		{nil, commitOK},
		{kerr.IllegalGeneration, commitRefused},
		{fmt.Errorf("commit: %w", kerr.UnknownMemberID), commitRefused},
		{kerr.RebalanceInProgress, commitRefused},
		{kerr.FencedInstanceID, commitRefused},
		{kerr.NotCoordinator, commitUnknown},
		{kerr.CoordinatorNotAvailable, commitUnknown},
		{errors.New("context deadline exceeded"), commitUnknown},
	} {
		if got := commitOutcomeOf(tt.err); got != tt.want {
			t.Errorf("commitOutcomeOf(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
