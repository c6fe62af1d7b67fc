package replica

// Tests of the replica's side of the incarnation rule: a leader does not
// count a follower fetching from a disk the state does not record; a
// follower that lost its disk tells the controller once it caught up; a
// replica elected for a disk it no longer has resigns.

import (
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

// newLeader returns replica 0 leading epoch 5 of replicas 0, 1, 2 whose
// recorded incarnations are 10, 11, 12, with one record proposed and
// durable on it (log: epoch-start batch at 0, the record at 1).
func newLeader(t *testing.T) *Replica {
	t.Helper()
	return newLeaderRecording(t, []Incarnation{10, 11, 12})
}

// newLeaderRecording is newLeader with the state recording incs (nil:
// none recorded yet, a new partition before its replicas' first catch-up).
func newLeaderRecording(t *testing.T, incs []Incarnation) *Replica {
	t.Helper()
	r := New(Config{ID: 0, Incarnation: 10}, HardState{Fenced: 4}, nil, 0, 0)
	r.Step(Message{Type: MsgFence, From: ControllerNode, Epoch: 5})
	r.Advance()
	r.HardStateDurable(HardState{Fenced: 5})
	r.Advance()
	r.SetState(State{Epoch: 5, Leader: 0, Replicas: []NodeID{0, 1, 2}, Incarnations: incs, Version: 2})
	if r.Status().Role != RoleLeader {
		t.Fatalf("not leading: %+v", r.Status())
	}
	if _, err := r.Propose(1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	r.Durable(2)
	r.Advance()
	return r
}

func TestLeaderIgnoresFollowerThatLostItsDisk(t *testing.T) {
	r := newLeader(t)
	// Node 1's disk was replaced; it reports the whole log durable, which
	// it may not even have fetched: a report of another incarnation.
	r.Step(Message{Type: MsgFetch, From: 1, To: 0, Epoch: 5, Seq: 1, Offset: 2, LastEpoch: 5, Incarnation: 99})
	r.Advance()
	if hw := r.Status().HW; hw != 0 {
		t.Fatalf("HW %d moved on the report of a replica that lost its disk", hw)
	}
	// A late report of its old incarnation does not count either.
	r.Step(Message{Type: MsgFetch, From: 1, To: 0, Epoch: 5, Seq: 2, Offset: 2, LastEpoch: 5, Incarnation: 11})
	r.Advance()
	if hw := r.Status().HW; hw != 0 {
		t.Fatalf("HW %d moved on a report of a lost disk", hw)
	}
	// Once the controller records the new incarnation, it counts.
	r.SetState(State{Epoch: 5, Leader: 0, Replicas: []NodeID{0, 1, 2}, Incarnations: []Incarnation{10, 99, 12}, Version: 3})
	r.Step(Message{Type: MsgFetch, From: 1, To: 0, Epoch: 5, Seq: 3, Offset: 2, LastEpoch: 5, Incarnation: 99})
	r.Advance()
	if hw := r.Status().HW; hw != 2 {
		t.Fatalf("HW %d once the new incarnation is recorded, want 2", hw)
	}
}

func TestFollowerThatLostItsDiskReportsCatchUp(t *testing.T) {
	r := New(Config{ID: 1, Incarnation: 99}, HardState{}, nil, 0, 0)
	r.SetState(State{Epoch: 5, Leader: 0, Replicas: []NodeID{0, 1, 2}, Incarnations: []Incarnation{10, 11, 12}, Version: 2})
	r.HardStateDurable(HardState{Fenced: 5})
	rd := r.Ready()
	r.Advance()
	var fetch *Message
	for i := range rd.Messages {
		if rd.Messages[i].Type == MsgFetch {
			fetch = &rd.Messages[i]
		}
	}
	if fetch == nil || fetch.Incarnation != 99 {
		t.Fatalf("fetch %+v, want one stamped with incarnation 99", fetch)
	}
	r.Step(Message{Type: MsgFetchResp, From: 0, To: 1, Epoch: 5, Seq: fetch.Seq, Offset: 0, LastEpoch: -1, HW: 2, ReadFrom: 0, ReadTo: 2,
		Batches: []Batch{{Base: 0, Last: 0, Epoch: 4, Data: []byte("a")}, {Base: 1, Last: 1, Epoch: 5, Control: true}, {Base: 2, Last: 2, Epoch: 5, Data: []byte("b")}}})
	r.Advance()
	r.Durable(3)
	rd = r.Ready()
	r.Advance()
	var up *Message
	for i := range rd.Messages {
		if rd.Messages[i].Type == MsgCaughtUp {
			up = &rd.Messages[i]
		}
	}
	if up == nil || up.Epoch != 5 || up.Incarnation != 99 || up.To != ControllerNode {
		t.Fatalf("no CaughtUp for epoch 5 from incarnation 99 after catching up: %+v", rd.Messages)
	}
	// Its fence answers carry the proof too.
	r.Step(Message{Type: MsgFence, From: ControllerNode, Epoch: 6})
	r.Advance()
	r.HardStateDurable(HardState{Fenced: 6})
	rd = r.Ready()
	r.Advance()
	for _, m := range rd.Messages {
		if m.Type == MsgFenceAck && (m.SyncedEpoch != 5 || m.Incarnation != 99 || m.Offset != wal.Offset(3)) {
			t.Fatalf("fence answer %+v, want synced epoch 5, incarnation 99, end 3", m)
		}
	}
}

func TestReplicaResignsEpochWonByItsLostDisk(t *testing.T) {
	r := New(Config{ID: 0, Incarnation: 99}, HardState{}, nil, 0, 0)
	r.Step(Message{Type: MsgFence, From: ControllerNode, Epoch: 5})
	r.Advance()
	r.HardStateDurable(HardState{Fenced: 5})
	r.Advance()
	// Epoch 5 was won by this node's previous disk (incarnation 10).
	r.SetState(State{Epoch: 5, Leader: 0, Replicas: []NodeID{0, 1, 2}, Incarnations: []Incarnation{10, 11, 12}, Version: 2})
	if st := r.Status(); st.Role == RoleLeader {
		t.Fatal("leads an epoch its lost disk won")
	}
	rd := r.Ready()
	r.Advance()
	if len(rd.Messages) == 0 || rd.Messages[0].Type != MsgLeaderUnreachable || rd.Messages[0].Epoch != 5 {
		t.Fatalf("no resignation: %+v", rd.Messages)
	}
}

// Recording the incarnation a follower has been fetching with does not
// forget what it reported: a follower that stopped just after the record
// was asked for (its catch-up report crossed its stop) keeps its durable
// end in the leader's view, so its lag stays visible. The CI failure of
// TestClusterFollowerLagMetric: the stopped follower's lag vanished.
func TestRecordingTheFetchingIncarnationKeepsItsReport(t *testing.T) {
	r := newLeaderRecording(t, nil)
	r.Step(Message{Type: MsgFetch, From: 1, To: 0, Epoch: 5, Seq: 1, Offset: 2, LastEpoch: 5, Incarnation: 11})
	r.Step(Message{Type: MsgFetch, From: 2, To: 0, Epoch: 5, Seq: 1, Offset: 2, LastEpoch: 5, Incarnation: 12})
	r.Advance()
	r.SetState(State{Epoch: 5, Leader: 0, Replicas: []NodeID{0, 1, 2}, Incarnations: []Incarnation{10, 11, 0}, Version: 3})
	_, fs := r.Followers()
	if len(fs) != 2 || fs[0].Fetched != 2 || fs[1].Fetched != 2 {
		t.Fatalf("followers %+v after recording the incarnation follower 1 fetches with, want both at 2", fs)
	}
	// Recording another incarnation than the one it fetched with forgets
	// the report: it came from a disk the state does not count.
	r.SetState(State{Epoch: 5, Leader: 0, Replicas: []NodeID{0, 1, 2}, Incarnations: []Incarnation{10, 11, 77}, Version: 4})
	if _, fs := r.Followers(); fs[1].Fetched != -1 {
		t.Fatalf("follower 2 at %d after another incarnation was recorded, want -1", fs[1].Fetched)
	}
}

// While no incarnation is recorded every fetch counts, but a follower that
// lost its disk reports for the new one: its end replaces the old disk's
// end rather than being lifted to it.
func TestUnrecordedFollowerNewDiskReplacesItsEnd(t *testing.T) {
	r := newLeaderRecording(t, nil)
	r.Step(Message{Type: MsgFetch, From: 1, To: 0, Epoch: 5, Seq: 1, Offset: 2, LastEpoch: 5, Incarnation: 11})
	r.Advance()
	r.Step(Message{Type: MsgFetch, From: 1, To: 0, Epoch: 5, Seq: 2, Offset: 0, LastEpoch: -1, Incarnation: 99})
	r.Advance()
	if _, fs := r.Followers(); fs[0].Fetched != 0 {
		t.Fatalf("follower 1 at %d after its new disk reported 0, want 0", fs[0].Fetched)
	}
}
