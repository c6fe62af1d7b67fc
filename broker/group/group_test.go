package group

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// harness drives one Group with a fake clock and records completions.
type harness struct {
	t      *testing.T
	g      *Group
	now    time.Time
	ticket Ticket
	done   map[Ticket]Completion
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	n := 0
	cfg := Config{
		MinSessionTimeout: time.Second,
		MaxSessionTimeout: time.Minute,
		OffsetsRetention:  time.Hour,
		NewMemberID:       func(c string) string { n++; return fmt.Sprintf("%s-%d", c, n) },
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	return &harness{t: t, g: New("g", cfg, now), now: now, done: make(map[Ticket]Completion)}
}

func (h *harness) collect() {
	for _, c := range h.g.TakeCompletions() {
		if _, dup := h.done[c.Ticket]; dup {
			h.t.Fatalf("ticket %d answered twice", c.Ticket)
		}
		h.done[c.Ticket] = c
	}
}

func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	h.g.Tick(h.now)
	h.collect()
}

func consumerJoin(memberID, instanceID, client string, protocols ...string) JoinRequest {
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	req := JoinRequest{
		MemberID: memberID, InstanceID: instanceID, ClientID: client,
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second,
		ProtocolType: "consumer", RequireKnownMemberID: true,
	}
	for _, p := range protocols {
		req.Protocols = append(req.Protocols, Protocol{Name: p, Metadata: []byte(client + "/" + p)})
	}
	return req
}

// join sends a JoinGroup and returns its ticket and immediate answer.
func (h *harness) join(req JoinRequest) (Ticket, JoinResult, bool) {
	h.ticket++
	res, parked := h.g.Join(h.now, h.ticket, req)
	h.collect()
	return h.ticket, res, parked
}

// joinedID does the MEMBER_ID_REQUIRED round and returns the parked ticket.
func (h *harness) joinNew(client string, protocols ...string) (string, Ticket) {
	h.t.Helper()
	_, res, parked := h.join(consumerJoin("", "", client, protocols...))
	if parked || !errors.Is(res.Err, ErrMemberIDRequired) || res.MemberID == "" {
		h.t.Fatalf("first join of %s: %+v parked=%v, want MEMBER_ID_REQUIRED with an id", client, res, parked)
	}
	id := res.MemberID
	tk, res, parked := h.join(consumerJoin(id, "", client, protocols...))
	if !parked {
		h.t.Fatalf("second join of %s answered at once: %+v", client, res)
	}
	return id, tk
}

func (h *harness) joinAnswer(tk Ticket) JoinResult {
	h.t.Helper()
	c, ok := h.done[tk]
	if !ok || c.Join == nil {
		h.t.Fatalf("join ticket %d not answered (state %s)", tk, h.g.State())
	}
	return *c.Join
}

func (h *harness) syncAnswer(tk Ticket) SyncResult {
	h.t.Helper()
	c, ok := h.done[tk]
	if !ok || c.Sync == nil {
		h.t.Fatalf("sync ticket %d not answered (state %s)", tk, h.g.State())
	}
	return *c.Sync
}

func (h *harness) sync(id string, gen Generation, assign map[string][]byte) (Ticket, SyncResult, bool) {
	h.ticket++
	res, parked := h.g.Sync(h.now, h.ticket, SyncRequest{MemberID: id, Generation: gen, Assignments: assign})
	h.collect()
	return h.ticket, res, parked
}

func (h *harness) wantState(s State) {
	h.t.Helper()
	if h.g.State() != s {
		h.t.Fatalf("state %s, want %s", h.g.State(), s)
	}
}

// stableTwo makes a Stable group of two members: a (leader) and b.
func stableTwo(h *harness) (a, b string) {
	h.t.Helper()
	a, ta := h.joinNew("a")
	ra := h.joinAnswer(ta)
	h.sync(a, ra.Generation, map[string][]byte{a: []byte("A")})
	b, tb := h.joinNew("b")
	h.wantState(PreparingRebalance)
	if err := h.g.Heartbeat(h.now, a, "", ra.Generation); !errors.Is(err, ErrRebalanceInProgress) {
		h.t.Fatalf("heartbeat of a during the rebalance: %v, want REBALANCE_IN_PROGRESS", err)
	}
	ta2, _, _ := h.join(consumerJoin(a, "", "a"))
	ra, rb := h.joinAnswer(ta2), h.joinAnswer(tb)
	ts, _, parked := h.sync(b, rb.Generation, nil)
	if !parked {
		h.t.Fatal("follower sync answered before the leader's")
	}
	_, res, _ := h.sync(a, ra.Generation, map[string][]byte{a: []byte("A"), b: []byte("B")})
	if string(res.Assignment) != "A" || string(h.syncAnswer(ts).Assignment) != "B" {
		h.t.Fatalf("assignments %q and %q", res.Assignment, h.syncAnswer(ts).Assignment)
	}
	h.wantState(Stable)
	return a, b
}

func TestJoinSyncRound(t *testing.T) {
	h := newHarness(t)
	a, ta := h.joinNew("a", "range", "roundrobin")
	ra := h.joinAnswer(ta)
	if ra.Err != nil || ra.Leader != a || ra.Generation != 1 || len(ra.Members) != 1 || ra.Protocol != "range" {
		t.Fatalf("lone join: %+v", ra)
	}
	h.wantState(CompletingRebalance)
	if err := h.g.Heartbeat(h.now, a, "", 1); err != nil {
		t.Fatalf("heartbeat while completing: %v", err)
	}
	if err := h.g.CheckCommit(h.now, a, "", 1); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("commit while completing: %v", err)
	}
	_, res, parked := h.sync(a, 1, map[string][]byte{a: []byte("all")})
	if parked || res.Err != nil || string(res.Assignment) != "all" {
		t.Fatalf("leader sync: %+v parked=%v", res, parked)
	}
	h.wantState(Stable)

	// A second member: a learns of the rebalance from its heartbeat.
	b, tb := h.joinNew("b", "roundrobin", "range")
	if _, ok := h.done[tb]; ok {
		t.Fatal("newcomer's join answered before the existing member rejoined")
	}
	if err := h.g.Heartbeat(h.now, a, "", 1); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("heartbeat: %v", err)
	}
	ta2, _, _ := h.join(consumerJoin(a, "", "a", "range", "roundrobin"))
	ra, rb := h.joinAnswer(ta2), h.joinAnswer(tb)
	if ra.Generation != 2 || rb.Generation != 2 || ra.Leader != a || rb.Leader != a {
		t.Fatalf("answers %+v / %+v", ra, rb)
	}
	if len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("leader got %d members, follower %d", len(ra.Members), len(rb.Members))
	}
	// One vote each: the tie goes to the first member's preference.
	if ra.Protocol != "range" || string(ra.Members[1].Metadata) != "b/range" {
		t.Fatalf("protocol %q, b's metadata %q", ra.Protocol, ra.Members[1].Metadata)
	}
	if _, res, _ := h.sync(b, 1, nil); !errors.Is(res.Err, ErrIllegalGeneration) {
		t.Fatalf("stale sync: %v", res.Err)
	}
	tsb, _, _ := h.sync(b, 2, nil)
	h.sync(a, 2, map[string][]byte{a: []byte("A"), b: []byte("B")})
	if got := h.syncAnswer(tsb); got.Err != nil || string(got.Assignment) != "B" || got.Protocol != "range" {
		t.Fatalf("b's sync: %+v", got)
	}
	if err := h.g.Heartbeat(h.now, b, "", 2); err != nil {
		t.Fatalf("heartbeat when stable: %v", err)
	}
}

func TestJoinErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*JoinRequest)
		want   error
	}{
		{"session too short", func(r *JoinRequest) { r.SessionTimeout = 500 * time.Millisecond }, ErrInvalidSessionTimeout},
		{"session too long", func(r *JoinRequest) { r.SessionTimeout = 2 * time.Minute }, ErrInvalidSessionTimeout},
		{"no shared protocol", func(r *JoinRequest) { r.Protocols = []Protocol{{Name: "sticky"}} }, ErrInconsistentProtocol},
		{"other protocol type", func(r *JoinRequest) { r.ProtocolType = "connect" }, ErrInconsistentProtocol},
		{"no protocols", func(r *JoinRequest) { r.Protocols = nil }, ErrInconsistentProtocol},
		{"unknown member id", func(r *JoinRequest) { r.MemberID = "nobody" }, ErrUnknownMember},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			stableTwo(h)
			req := consumerJoin("", "", "c")
			tc.mutate(&req)
			_, res, parked := h.join(req)
			if parked || !errors.Is(res.Err, tc.want) {
				t.Fatalf("join: %v parked=%v, want %v", res.Err, parked, tc.want)
			}
			h.wantState(Stable)
		})
	}
}

func TestSessionExpiryRebalances(t *testing.T) {
	h := newHarness(t)
	a, b := stableTwo(h)
	gen := h.g.Generation()
	for range 4 { // a keeps heartbeating; b is silent
		h.advance(3 * time.Second)
		if err := h.g.Heartbeat(h.now, a, "", gen); err != nil && !errors.Is(err, ErrRebalanceInProgress) {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	if h.g.Len() != 1 {
		t.Fatalf("%d members after b's session expired", h.g.Len())
	}
	h.wantState(PreparingRebalance)
	if err := h.g.Heartbeat(h.now, b, "", gen); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("expired member's heartbeat: %v", err)
	}
	if err := h.g.CheckCommit(h.now, b, "", gen); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("expired member's commit: %v", err)
	}
	tk, _, _ := h.join(consumerJoin(a, "", "a"))
	if r := h.joinAnswer(tk); r.Generation != gen+1 || r.Leader != a || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
}

func TestRebalanceTimeoutDropsSilentMembers(t *testing.T) {
	h := newHarness(t)
	a, b := stableTwo(h)
	gen := h.g.Generation()
	c, tc := h.joinNew("c")
	ta, _, _ := h.join(consumerJoin(a, "", "a"))
	// b heartbeats (so its session lives) but never rejoins.
	for range 10 {
		h.advance(3 * time.Second)
		_ = h.g.Heartbeat(h.now, b, "", gen)
		if h.g.State() != PreparingRebalance {
			break
		}
	}
	h.wantState(CompletingRebalance)
	ra, rc := h.joinAnswer(ta), h.joinAnswer(tc)
	if ra.Err != nil || rc.Err != nil || ra.Generation != gen+1 || len(ra.Members) != 2 {
		t.Fatalf("answers %+v / %+v", ra, rc)
	}
	if _, err := h.g.validateMember(b, ""); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("b still a member: %v", err)
	}
	if err := h.g.Heartbeat(h.now, b, "", gen); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("b's heartbeat: %v", err)
	}
	if rc.MemberID != c {
		t.Fatalf("c's id %q, want %q", rc.MemberID, c)
	}
}

func TestSyncTimeoutRebalances(t *testing.T) {
	h := newHarness(t)
	a, b := stableTwo(h)
	h.join(consumerJoin(a, "", "a"))
	tb, _, _ := h.join(consumerJoin(b, "", "b"))
	gen := h.joinAnswer(tb).Generation
	ts, _, _ := h.sync(b, gen, nil)
	h.advance(25 * time.Second) // the leader a never syncs
	if r := h.syncAnswer(ts); !errors.Is(r.Err, ErrRebalanceInProgress) {
		t.Fatalf("b's parked sync: %v", r.Err)
	}
	if h.g.Len() != 1 {
		t.Fatalf("%d members; the leader should be gone", h.g.Len())
	}
}

func TestStaticMemberReplacement(t *testing.T) {
	h := newHarness(t)
	join := func(id string) JoinRequest { return consumerJoin(id, "inst-1", "s") }
	// Static members join without the MEMBER_ID_REQUIRED round.
	tk, _, parked := h.join(join(""))
	r := h.joinAnswer(tk)
	if !parked || r.Err != nil {
		t.Fatalf("static join: %+v", r)
	}
	old := r.MemberID
	h.sync(old, r.Generation, map[string][]byte{old: []byte("X")})
	b, tb := h.joinNew("b")
	tk, _, _ = h.join(join(old))
	ra := h.joinAnswer(tk)
	h.joinAnswer(tb)
	h.sync(b, ra.Generation, nil)
	h.sync(old, ra.Generation, map[string][]byte{old: []byte("X"), b: []byte("Y")})
	h.wantState(Stable)
	gen := h.g.Generation()

	// The static leader restarts with the same instance id: a new member id,
	// the old one fenced, and a rebalance so the leader sees the members.
	tk, _, parked = h.join(join(""))
	if !parked {
		t.Fatal("restarted static leader not parked for a rebalance")
	}
	newID := h.g.static["inst-1"]
	if newID == old {
		t.Fatal("instance kept its old member id")
	}
	if err := h.g.Heartbeat(h.now, old, "inst-1", gen); !errors.Is(err, ErrFencedInstance) {
		t.Fatalf("old id heartbeat: %v, want FENCED_INSTANCE_ID", err)
	}
	if err := h.g.CheckCommit(h.now, old, "inst-1", gen); !errors.Is(err, ErrFencedInstance) {
		t.Fatalf("old id commit: %v, want FENCED_INSTANCE_ID", err)
	}
	if _, res, _ := h.sync(old, gen, nil); !errors.Is(res.Err, ErrUnknownMember) {
		t.Fatalf("old id sync without instance: %v", res.Err)
	}
	h.join(consumerJoin(b, "", "b"))
	rn := h.joinAnswer(tk)
	if rn.MemberID != newID || rn.Leader != newID || rn.Generation != gen+1 {
		t.Fatalf("new static member's answer %+v", rn)
	}
	h.sync(b, rn.Generation, nil)
	h.sync(newID, rn.Generation, map[string][]byte{newID: []byte("X2"), b: []byte("Y2")})
	h.wantState(Stable)

	// b leaves and rejoins as a static follower, then restarts: no rebalance.
	if err := h.g.Leave(h.now, b, ""); err != nil {
		t.Fatal(err)
	}
	t2, _, _ := h.join(consumerJoin("", "inst-2", "f"))
	h.join(consumerJoin(newID, "inst-1", "s"))
	rf := h.joinAnswer(t2)
	h.sync(rf.MemberID, rf.Generation, nil)
	h.sync(newID, rf.Generation, map[string][]byte{newID: []byte("X3"), rf.MemberID: []byte("F3")})
	gen = h.g.Generation()
	_, res, parked := h.join(consumerJoin("", "inst-2", "f"))
	if parked || res.Err != nil || res.Generation != gen || res.MemberID == rf.MemberID {
		t.Fatalf("static follower restart: %+v parked=%v", res, parked)
	}
	h.wantState(Stable)
	if _, s, _ := h.sync(res.MemberID, gen, nil); string(s.Assignment) != "F3" {
		t.Fatalf("restarted follower's assignment %q", s.Assignment)
	}
	if err := h.g.Heartbeat(h.now, rf.MemberID, "inst-2", gen); !errors.Is(err, ErrFencedInstance) {
		t.Fatalf("fenced follower heartbeat: %v", err)
	}
}

func TestLeave(t *testing.T) {
	h := newHarness(t)
	a, b := stableTwo(h)
	if err := h.g.Leave(h.now, "nobody", ""); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("unknown leave: %v", err)
	}
	if err := h.g.Leave(h.now, a, ""); err != nil {
		t.Fatal(err)
	}
	h.wantState(PreparingRebalance)
	tk, _, _ := h.join(consumerJoin(b, "", "b"))
	if r := h.joinAnswer(tk); r.Leader != b || len(r.Members) != 1 {
		t.Fatalf("after the leader left: %+v", r)
	}
	if err := h.g.Leave(h.now, b, ""); err != nil {
		t.Fatal(err)
	}
	h.wantState(Empty)
}

func TestCommitRules(t *testing.T) {
	h := newHarness(t)
	if err := h.g.CheckCommit(h.now, "", "", -1); err != nil {
		t.Fatalf("admin commit on an empty group: %v", err)
	}
	a, _ := stableTwo(h)
	gen := h.g.Generation()
	tests := []struct {
		name     string
		member   string
		instance string
		gen      Generation
		want     error
	}{
		{"current member", a, "", gen, nil},
		{"stale generation", a, "", gen - 1, ErrIllegalGeneration},
		{"unknown member", "x", "", gen, ErrUnknownMember},
		{"admin while members are active", "", "", -1, ErrUnknownMember},
		{"unknown instance", a, "inst", gen, ErrUnknownMember},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := h.g.CheckCommit(h.now, tc.member, tc.instance, tc.gen); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("CheckCommit: %v, want %v", err, tc.want)
			}
		})
	}
	// A member whose generation ended in a rebalance cannot commit.
	h.joinNew("c")
	tk, _, _ := h.join(consumerJoin(a, "", "a"))
	h.advance(25 * time.Second) // b never rejoins
	h.joinAnswer(tk)
	if err := h.g.CheckCommit(h.now, a, "", gen); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("commit with the expired generation: %v", err)
	}
}

func TestEmptyGroupOffsetExpiry(t *testing.T) {
	h := newHarness(t)
	a, b := stableTwo(h)
	tp := TopicPartition{Topic: "t", Partition: 3}
	h.g.SetOffsets(map[TopicPartition]Offset{tp: {Offset: 42, Generation: h.g.Generation(), CommitTime: h.now}})
	h.advance(2 * time.Hour) // members gone by session expiry; offsets kept until the group is empty an hour
	h.wantState(Empty)
	if got := h.g.ExpiredOffsets(h.now); len(got) != 0 {
		t.Fatalf("expired right after emptying: %v", got)
	}
	h.advance(59 * time.Minute)
	if got := h.g.ExpiredOffsets(h.now); len(got) != 0 {
		t.Fatalf("expired before retention: %v", got)
	}
	h.advance(time.Minute)
	got := h.g.ExpiredOffsets(h.now)
	if len(got) != 1 || got[0] != tp {
		t.Fatalf("expired %v, want [%v]", got, tp)
	}
	h.g.DeleteOffsets(got)
	if !h.g.Deletable() {
		t.Fatal("empty group without offsets is not deletable")
	}
	if err := h.g.MarkDead(h.now); err != nil {
		t.Fatal(err)
	}
	if _, res, _ := h.join(consumerJoin(a, "", "a")); !errors.Is(res.Err, ErrDead) {
		t.Fatalf("join of a dead group: %v", res.Err)
	}
	_ = b
}

func TestParkedJoinReplacedAndFencedAnswersOnce(t *testing.T) {
	h := newHarness(t)
	a, _ := stableTwo(h)
	t1, _, _ := h.join(consumerJoin(a, "", "a"))
	t2, _, _ := h.join(consumerJoin(a, "", "a"))
	if r := h.joinAnswer(t1); !errors.Is(r.Err, ErrRebalanceInProgress) {
		t.Fatalf("replaced join: %v", r.Err)
	}
	h.advance(time.Minute)
	if r := h.joinAnswer(t2); r.Err != nil || r.Leader != a {
		t.Fatalf("join after the rebalance timeout: %+v", r)
	}
}

// A group taken over by a new coordinator goes on from the generation its
// predecessor reached, and never back.
func TestContinueFromGeneration(t *testing.T) {
	h := newHarness(t)
	h.g.ContinueFrom(41)
	h.g.ContinueFrom(7) // lower: ignored
	_, ta := h.joinNew("a")
	if ra := h.joinAnswer(ta); ra.Err != nil || ra.Generation != 42 {
		t.Fatalf("first join after ContinueFrom(41): %+v, want generation 42", ra)
	}
}
