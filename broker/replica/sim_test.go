package replica

// The deterministic simulator (doc.go, Simulation): one thread, an event heap
// ordered by (time, insertion counter), a root PCG per seed with one
// sub-seed per subsystem. It drives three Replicas, a Controller, an etcd
// register (CAS answers late, lost, or lost after being applied; leases; a
// watch delivering the state late or not at all), a network that drops,
// delays, duplicates, reorders and partitions, crashable disks, and clients
// that propose records and record their acknowledgements. The checker
// (sim_check_test.go) watches every step.

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/wal"
)

const (
	nReplicas    = 3
	epController = nReplicas     // network endpoint of the controller
	epRegister   = nReplicas + 1 // network endpoint of etcd
	nEndpoints   = nReplicas + 2
	tickUnits    = 10 // sim time units per tick
)

// knobs are drawn per seed (swarm testing).
type knobs struct {
	loss, dup, reorder     float64
	minDelay, maxDelay     int64
	fsyncDelay             int64
	partitionRate          float64
	crashRate, pauseRate   float64
	ctrlCrashRate          float64
	syncErrRate            float64
	crashKeepsPrefix       bool
	regLoss, regLossAfter  float64
	regDelay               int64
	watchEvery             int64
	watchLoss              float64
	acks1                  float64
	proposeEvery           int64
	fetchBudget            int
	leaseTicks             int64
	drainRate              float64 // per fault step: an operator drains or undrains a broker
	cfg                    Config
	ccfg                   ControllerConfig
	safetyTicks, liveTicks int64
}

func drawKnobs(r *rand.Rand, short bool) knobs {
	f := func(p, hi float64) float64 {
		if r.Float64() < p {
			return 0
		}
		return r.Float64() * hi
	}
	k := knobs{
		loss:             f(0.3, 0.3),
		dup:              f(0.5, 0.1),
		reorder:          f(0.4, 0.2),
		minDelay:         1 + r.Int64N(5),
		fsyncDelay:       1 + r.Int64N(15),
		partitionRate:    f(0.3, 0.03),
		crashRate:        f(0.3, 0.01),
		pauseRate:        f(0.5, 0.01),
		ctrlCrashRate:    f(0.5, 0.005),
		syncErrRate:      f(0.7, 0.01),
		crashKeepsPrefix: r.IntN(2) == 0,
		regLoss:          f(0.5, 0.2),
		regLossAfter:     f(0.5, 0.2),
		regDelay:         1 + r.Int64N(30),
		watchEvery:       int64(10 + r.IntN(40)),
		watchLoss:        f(0.5, 0.3),
		acks1:            f(0.5, 0.2),
		proposeEvery:     int64(8 + r.IntN(40)),
		fetchBudget:      4 + r.IntN(13),
		leaseTicks:       int64(5 + r.IntN(10)),
	}
	k.maxDelay = k.minDelay + r.Int64N(30)
	k.cfg = Config{
		LagTicks:         5 + r.IntN(10),
		FetchWaitTicks:   1 + r.IntN(6),
		RetryTicks:       1 + r.IntN(3),
		UnreachableTicks: 5 + r.IntN(10),
	}
	if r.IntN(5) == 0 {
		k.cfg.MinISR = nReplicas // acks from every replica
	}
	// A follower must not give up on its leader faster than a round trip
	// (and an fsync) of a healed network.
	rtt := int(2*k.maxDelay+k.fsyncDelay)/tickUnits + 1
	k.cfg.UnreachableTicks += rtt + k.cfg.FetchWaitTicks
	k.cfg.RetryTicks += rtt / 2
	k.ccfg = ControllerConfig{
		RetryTicks:     1 + r.IntN(3),
		RoundTicks:     10 + r.IntN(20),
		ComplaintTicks: 10 + r.IntN(20),
		PreferredTicks: 20 + r.IntN(60),
	}
	// Half the seeds run as the broker does: a leader whose log is all
	// committed appends no epoch-start batch; and half with the controller
	// leaving a preferred replica that missed a round alone for a while
	// (the other half try it again at once, for more elections).
	k.cfg.ElideEpochStart = r.IntN(2) == 0
	if r.IntN(2) == 0 {
		k.ccfg.QuietTicks = -1
	}
	// Drawn last, so the knobs above stay as they were for every seed.
	k.drainRate = f(0.5, 0.02)
	k.safetyTicks, k.liveTicks = 300, 300
	if short {
		k.safetyTicks = 150
	}
	return k
}

type event struct {
	at   int64
	seq  uint64
	kind string
	node int
	fn   func()
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type simNode struct {
	id          NodeID
	r           *Replica
	up          bool
	inc         int // incarnation; events of an older one are dropped
	pausedUntil int64
	disk        simDisk
	hwCkpt      wal.Offset  // last HW seen (a conservative checkpoint)
	lastHW      wal.Offset  // this incarnation, for the checker
	incarnation Incarnation // of its disk (sim_diskloss_test.go)
	lostSynced  []Batch     // what its last lost disk held, synced (quorumHolds)
	leaderStart wal.Offset  // the highest log start its leaders' answers named (sim_retention_test.go)
	lostStart   wal.Offset  // where that disk's log started
}

type simCtrl struct {
	c           *Controller
	up          bool
	inc         int
	pausedUntil int64
}

type register struct {
	state  State
	lastHB [nReplicas]int64
}

// record is one proposed batch, as the oracle knows it.
type record struct {
	id       uint64
	node     NodeID
	epoch    wal.Epoch
	base     wal.Offset
	count    int
	acksAll  bool
	acked    bool
	ackedAt  int64
	proposed bool
}

type sim struct {
	seed  uint64
	k     knobs
	now   int64
	seq   uint64
	evs   eventHeap
	hash  hash.Hash64
	steps int

	rNet, rDisk, rClient, rFault, rBug *rand.Rand
	bugSites                           map[string]bool

	nodes [nReplicas]*simNode
	dl    diskLoss
	ctrl  simCtrl
	reg   register
	cut   [nEndpoints][nEndpoints]bool

	records    []*record // by id-1
	clientView State
	consumer   wal.Offset

	bugs  bugs
	cbugs controllerBugs

	live     bool // liveness phase
	draining []NodeID
	done     bool
	failure  string
	trace    *strings.Builder
	chk      checker
	leaderOf map[wal.Epoch]NodeID // from the register
	wire     simWire              // the brokers' encoding of each message (sim_wire_test.go)
	reads    simReads             // consumers reading every replica (sim_reads_test.go)
	ret      retention            // log starts moving, long absences (sim_retention_test.go)
}

func newSim(seed uint64, short bool, b bugs, cb controllerBugs) *sim {
	root := rand.New(rand.NewPCG(seed, 0x5eed))
	sub := func() *rand.Rand { return rand.New(rand.NewPCG(root.Uint64(), root.Uint64())) }
	s := &sim{seed: seed, hash: fnv.New64a(), bugs: b, cbugs: cb, leaderOf: map[wal.Epoch]NodeID{}}
	s.k = drawKnobs(sub(), short)
	s.rNet, s.rDisk, s.rClient, s.rFault, s.rBug = sub(), sub(), sub(), sub(), sub()
	s.wire.init(sub())
	s.bugSites = map[string]bool{}
	s.reg.state = State{Epoch: 0, Leader: NoLeader, Replicas: []NodeID{0, 1, 2}, Version: 1}
	for i := range s.nodes {
		s.nodes[i] = &simNode{id: NodeID(i)}
	}
	s.initDiskLoss(sub())
	s.clientView = s.reg.state.Clone()
	s.chk.init(s)
	for i := range s.nodes {
		n := s.nodes[i]
		s.startNode(n)
		off := int64(i + 1)
		s.every(tickUnits, off, "tick", i, func() { s.tickNode(n) })
		s.every(s.k.watchEvery, off+3, "watch", i, func() { s.watch(i) })
	}
	s.startCtrl()
	s.every(tickUnits, 5, "ctick", epController, s.tickCtrl)
	s.every(s.k.watchEvery, 7, "watch", epController, func() { s.watch(epController) })
	s.every(tickUnits, 9, "faults", -1, s.faults)
	s.every(s.k.proposeEvery, 2, "client", -1, s.client)
	s.every(3*tickUnits, 8, "consumer", -1, s.consume)
	s.initReads(sub())
	s.initRetention(sub())
	return s
}

// buggify is the simulator's fault site: enabled for a run with p=0.25 at
// its first visit, then firing with p=0.25 per visit. Never in the core.
func (s *sim) buggify(site string) bool {
	on, seen := s.bugSites[site]
	if !seen {
		on = s.rBug.Float64() < 0.25
		s.bugSites[site] = on
	}
	return on && !s.live && s.rBug.Float64() < 0.25
}

func (s *sim) tracef(format string, args ...any) {
	if s.trace != nil {
		fmt.Fprintf(s.trace, "%6d ", s.now)
		fmt.Fprintf(s.trace, format, args...)
		s.trace.WriteByte('\n')
	}
}

func (s *sim) fail(format string, args ...any) {
	if s.failure == "" {
		s.failure = fmt.Sprintf("t=%d: ", s.now) + fmt.Sprintf(format, args...)
		s.tracef("FAIL %s", s.failure)
	}
	s.done = true
}

func (s *sim) at(t int64, kind string, node int, fn func()) {
	s.seq++
	heap.Push(&s.evs, &event{at: t, seq: s.seq, kind: kind, node: node, fn: fn})
}

func (s *sim) after(d int64, kind string, node int, fn func()) { s.at(s.now+d, kind, node, fn) }

func (s *sim) every(period, offset int64, kind string, node int, fn func()) {
	var loop func()
	loop = func() {
		fn()
		s.after(period, kind, node, loop)
	}
	s.at(offset, kind, node, loop)
}

// run plays the schedule: the safety phase, then the liveness phase.
func (s *sim) run() {
	safetyEnd := s.k.safetyTicks * tickUnits
	end := safetyEnd + s.k.liveTicks*tickUnits
	s.at(safetyEnd, "heal", -1, s.startLiveness)
	for !s.done && s.evs.Len() > 0 {
		e := heap.Pop(&s.evs).(*event)
		if e.at > end {
			break
		}
		s.now = e.at
		var b [24]byte
		binary.LittleEndian.PutUint64(b[:], uint64(e.at))
		binary.LittleEndian.PutUint64(b[8:], e.seq)
		binary.LittleEndian.PutUint64(b[16:], uint64(int64(e.node)))
		s.hash.Write(b[:])
		s.hash.Write([]byte(e.kind))
		s.steps++
		e.fn()
		if s.steps%256 == 0 && !s.done {
			s.chk.logMatching()
		}
		if s.live && !s.done && s.converged() {
			s.chk.final()
			s.readsFinal()
			s.done = true
			return
		}
	}
	if !s.done {
		s.fail("liveness: no convergence after %d ticks of healing: %s", s.k.liveTicks, s.describe())
	}
}

func (s *sim) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "register %+v;", s.reg.state)
	for _, n := range s.nodes {
		if !n.up {
			fmt.Fprintf(&b, " n%d down;", n.id)
			continue
		}
		st := n.r.Status()
		fmt.Fprintf(&b, " n%d %s e%d fenced %d hw %d end %d durable %d err %v;", n.id, st.Role, st.Epoch, st.Fenced, st.HW, st.End, st.Durable, st.Err)
	}
	return b.String()
}

// --- nodes ---

func (s *sim) startNode(n *simNode) {
	n.inc++
	n.up = true
	n.pausedUntil = 0
	cfg := s.k.cfg
	cfg.ID = n.id
	cfg.Incarnation = n.incarnation
	cfg.bugs = s.bugs
	end := n.disk.syncedEnd()
	n.r = New(cfg, n.disk.hs, n.disk.chain(n.disk.synced), end, min(n.hwCkpt, end))
	if st := n.disk.start; st > 0 {
		n.r.SetLogStart(st, st) // the driver tells the core, as the broker's open does
	}
	n.lastHW = min(n.hwCkpt, end)
	s.tracef("n%d start hs=%+v end=%d", n.id, n.disk.hs, end)
}

func (s *sim) crashNode(n *simNode) {
	if !n.up {
		return
	}
	keep := 0
	if s.k.crashKeepsPrefix && len(n.disk.pending) > 0 {
		keep = s.rDisk.IntN(len(n.disk.pending) + 1)
	}
	n.disk.crash(keep)
	n.up = false
	n.inc++
	s.tracef("n%d crash keep=%d synced end=%d", n.id, keep, n.disk.syncedEnd())
	s.chk.afterDiskLoss()
	s.after(1+s.rFault.Int64N(30*tickUnits), "restart", int(n.id), func() {
		if !n.up {
			s.startNode(n)
		}
	})
}

func (s *sim) paused(until int64) bool { return s.now < until }

func (s *sim) tickNode(n *simNode) {
	if !n.up || s.paused(n.pausedUntil) {
		return
	}
	if !s.cut[n.id][epRegister] {
		s.reg.lastHB[n.id] = s.now
	}
	n.r.Tick()
	s.drain(n)
}

// drain carries out a node's Ready until it has none.
func (s *sim) drain(n *simNode) {
	for n.up && !s.done && n.r.HasReady() {
		rd := n.r.Ready()
		st := n.r.Status()
		if rd.Truncate >= 0 {
			s.chk.truncate(n, rd.Truncate)
			s.readsTruncated(n, rd.Truncate)
			n.disk.truncate(rd.Truncate)
			s.tracef("n%d truncate %d: end %d", n.id, rd.Truncate, n.disk.end())
		}
		if rd.HardState != nil {
			s.writeHardState(n, *rd.HardState)
		}
		for _, b := range rd.Appends {
			s.chk.append(n, st, b)
			n.disk.append(b.Clone())
		}
		if len(rd.Appends) > 0 {
			s.tracef("n%d append [%d,%d) e%d", n.id, rd.Appends[0].Base, rd.Appends[len(rd.Appends)-1].End(), rd.Appends[len(rd.Appends)-1].Epoch)
			s.startSync(n)
			if s.buggify("crash-mid-ready") {
				s.crashNode(n)
				return
			}
		}
		for _, m := range rd.Messages {
			if m.Type == MsgFetchResp && m.ReadTo > m.ReadFrom {
				m.Batches = s.read(n, m.ReadFrom, m.ReadTo)
			}
			s.chk.message(n, st, m)
			s.sendFrom(int(n.id), m)
		}
		if rd.HWChanged {
			// The driver moves a follower's log start with its leader's
			// before the new HW is seen, as the broker's does.
			s.followLogStart(n, n.leaderStart)
			s.chk.hw(n, st, rd.HW)
			n.hwCkpt = rd.HW
		}
		for _, t := range rd.Released {
			s.chk.released(n, st, t)
		}
		for _, te := range rd.Failed {
			s.tracef("n%d failed token %d: %v", n.id, te.Token, te.Err)
		}
		n.r.Advance()
		if rd.Truncate >= 0 {
			n.r.Truncated(n.disk.end())
		}
	}
}

func (s *sim) read(n *simNode, from, to wal.Offset) []Batch {
	l := n.disk.log()
	i, ok := batchAt(l, from)
	if !ok {
		if s.chk.consequences {
			return nil
		}
		s.fail("check 9: leader n%d serves a fetch from %d, not a batch start in its log: the follower's log diverges there", n.id, from)
		return nil
	}
	var out []Batch
	for ; i < len(l) && l[i].Base < to && len(out) < s.k.fetchBudget; i++ {
		out = append(out, l[i])
	}
	return out
}

func (s *sim) startSync(n *simNode) {
	seq, inc := n.disk.seq, n.inc
	d := 1 + s.rDisk.Int64N(s.k.fsyncDelay)
	if s.buggify("slow-fsync") {
		d *= 20
	}
	s.after(d, "fsync", int(n.id), func() { s.syncDone(n, inc, seq) })
}

func (s *sim) syncDone(n *simNode, inc int, seq uint64) {
	if n.inc != inc || !n.up {
		return
	}
	if s.paused(n.pausedUntil) {
		s.at(n.pausedUntil+1, "fsync", int(n.id), func() { s.syncDone(n, inc, seq) })
		return
	}
	if !s.live && s.rDisk.Float64() < s.k.syncErrRate {
		s.tracef("n%d fsync error", n.id)
		n.r.Fail(fmt.Errorf("fsync: injected error"))
		s.drain(n)
		s.after(1+s.rFault.Int64N(5*tickUnits), "crash", int(n.id), func() {
			if n.inc == inc {
				s.crashNode(n)
			}
		})
		return
	}
	n.disk.syncUpTo(seq)
	n.r.Durable(n.disk.syncedEnd())
	s.drain(n)
}

func (s *sim) writeHardState(n *simNode, hs HardState) {
	n.disk.hsQueue = append(n.disk.hsQueue, hs)
	if len(n.disk.hsQueue) > 1 {
		return // one write at a time, in order
	}
	s.nextHardState(n)
}

func (s *sim) nextHardState(n *simNode) {
	inc := n.inc
	d := 1 + s.rDisk.Int64N(2*s.k.fsyncDelay)
	var done func()
	done = func() {
		if n.inc != inc || !n.up || len(n.disk.hsQueue) == 0 {
			return
		}
		if s.paused(n.pausedUntil) {
			s.at(n.pausedUntil+1, "hs", int(n.id), done)
			return
		}
		hs := n.disk.hsQueue[0]
		n.disk.hsQueue = n.disk.hsQueue[1:]
		if hs.Fenced > n.disk.hs.Fenced {
			n.disk.hs = hs
		}
		n.r.HardStateDurable(n.disk.hs)
		s.drain(n)
		if len(n.disk.hsQueue) > 0 {
			s.nextHardState(n)
		}
	}
	s.after(d, "hs", int(n.id), done)
}

// --- controller and register ---

func (s *sim) startCtrl() {
	s.ctrl.inc++
	s.ctrl.up = true
	cfg := s.k.ccfg
	cfg.bugs = s.cbugs
	s.ctrl.c = NewController(cfg)
	s.ctrl.c.SetState(s.reg.state) // a new controller reads etcd
	s.tracef("controller start")
}

func (s *sim) liveSet() []NodeID {
	var ids []NodeID
	for i, hb := range s.reg.lastHB {
		if hb > 0 && s.now-hb <= s.k.leaseTicks*tickUnits {
			ids = append(ids, NodeID(i))
		}
	}
	return ids
}

func (s *sim) tickCtrl() {
	if !s.ctrl.up || s.paused(s.ctrl.pausedUntil) {
		return
	}
	s.ctrl.c.SetLive(s.liveSet())
	s.ctrl.c.SetDraining(s.draining)
	s.ctrl.c.Tick()
	s.drainCtrl()
}

func (s *sim) drainCtrl() {
	c := s.ctrl.c
	for s.ctrl.up && !s.done && c.HasReady() {
		rd := c.Ready()
		for _, m := range rd.Messages {
			s.sendFrom(epController, m)
		}
		if rd.CAS != nil {
			s.cas(*rd.CAS)
		}
		c.Advance()
	}
}

// cas sends a CAS to etcd; the request or its answer may be late or lost.
func (s *sim) cas(req CAS) {
	inc := s.ctrl.inc
	req.New = req.New.Clone()
	if s.rNet.Float64() < s.k.regLoss {
		s.tracef("cas lost before etcd")
		return
	}
	s.after(1+s.rNet.Int64N(s.k.regDelay), "cas", epRegister, func() {
		ok := s.reg.state.Version == req.Expect
		if ok {
			s.chk.casApplied(s.reg.state, req.New)
			s.reg.state = req.New.Clone()
			s.leaderOf[req.New.Epoch] = req.New.Leader
			s.tracef("etcd: state %+v", req.New)
			for i := range nEndpoints - 1 {
				s.watch(i)
			}
		}
		if s.rNet.Float64() < s.k.regLossAfter {
			s.tracef("cas answer lost (applied %v)", ok)
			return
		}
		cur := s.reg.state.Clone()
		s.after(1+s.rNet.Int64N(s.k.regDelay), "casr", epController, func() {
			if s.ctrl.inc != inc || !s.ctrl.up {
				return
			}
			s.ctrl.c.CASResult(ok, cur)
			s.drainCtrl()
		})
	})
}

// watch delivers etcd's state to an endpoint, maybe late, maybe lost.
func (s *sim) watch(to int) {
	if s.rNet.Float64() < s.k.watchLoss && !s.live {
		return
	}
	d := 1 + s.rNet.Int64N(s.k.regDelay)
	if s.buggify("late-watch") {
		d *= 10
	}
	m := Message{Type: MsgState, State: s.reg.state.Clone()}
	s.deliverAfter(epRegister, to, d, func() (Message, bool) { return m, true })
}

// --- network ---

func endpointOf(id NodeID) int {
	if id == ControllerNode {
		return epController
	}
	return int(id)
}

// sendFrom sends m in the brokers' encoding (sim_wire_test.go), with the
// network's faults.
func (s *sim) sendFrom(from int, m Message) {
	to := endpointOf(m.To)
	if to < 0 || to >= nEndpoints {
		return
	}
	recv, ok := s.wire.encode(s, from, m)
	if ok {
		s.transmit(from, to, recv)
	}
}

// transmit carries what recv decodes at delivery from one endpoint to
// another: lost, duplicated, delayed or reordered as the knobs say.
func (s *sim) transmit(from, to int, recv func() (Message, bool)) {
	if !s.live && (s.rNet.Float64() < s.k.loss || s.buggify("drop")) {
		return
	}
	copies := 1
	if s.rNet.Float64() < s.k.dup {
		copies = 2
	}
	for range copies {
		d := s.k.minDelay + s.rNet.Int64N(s.k.maxDelay-s.k.minDelay+1)
		if s.rNet.Float64() < s.k.reorder {
			d += s.rNet.Int64N(5 * s.k.maxDelay)
		}
		s.deliverAfter(from, to, d, recv)
	}
}

// deliverAfter hands what recv decodes to endpoint to after d, unless the
// link is cut; recv false: nothing to step now.
func (s *sim) deliverAfter(from, to int, d int64, recv func() (Message, bool)) {
	if s.cut[from][to] {
		return
	}
	var deliver func()
	deliver = func() {
		if s.cut[from][to] {
			return
		}
		if to == epController {
			if !s.ctrl.up {
				return
			}
			if s.paused(s.ctrl.pausedUntil) {
				s.at(s.ctrl.pausedUntil+1, "msg", to, deliver)
				return
			}
			m, ok := recv()
			if !ok || s.fromLostDisk(from, m) {
				return
			}
			s.tracef("ctrl <- %s from %d e%d off %d le %d err %d", m.Type, m.From, m.Epoch, m.Offset, m.LastEpoch, m.Err)
			if m.Type == MsgState {
				s.ctrl.c.SetState(m.State)
			} else {
				s.ctrl.c.Step(m)
			}
			s.drainCtrl()
			return
		}
		n := s.nodes[to]
		if !n.up {
			return
		}
		if s.paused(n.pausedUntil) {
			s.at(n.pausedUntil+1, "msg", to, deliver)
			return
		}
		m, ok := recv()
		if !ok || s.fromLostDisk(from, m) {
			return
		}
		s.stepNode(n, m)
	}
	s.after(d, "msg", to, deliver)
}

// stepNode hands m to a live, running node.
func (s *sim) stepNode(n *simNode, m Message) {
	s.tracef("n%d <- %s from %d e%d seq %d off %d le %d hw %d err %d div %v(%d,%d) unjudged %v batches %d", n.id, m.Type, m.From, m.Epoch, m.Seq, m.Offset, m.LastEpoch, m.HW, m.Err, m.Diverging, m.DivergingEpoch, m.DivergingEnd, m.Unjudged, len(m.Batches))
	n.r.Step(m)
	s.drain(n)
}

// --- faults ---

func (s *sim) faults() {
	if s.live {
		return
	}
	r := s.rFault
	if r.Float64() < s.k.partitionRate {
		s.partition()
	}
	if r.Float64() < s.k.crashRate {
		s.crashNode(s.nodes[r.IntN(nReplicas)])
	}
	s.maybeLoseDisk()
	if r.Float64() < s.k.pauseRate {
		n := s.nodes[r.IntN(nReplicas)]
		n.pausedUntil = max(n.pausedUntil, s.now+1+r.Int64N(30*tickUnits))
		s.tracef("n%d paused until %d", n.id, n.pausedUntil)
	}
	if s.k.drainRate > 0 && r.Float64() < s.k.drainRate {
		// Drains stay through the liveness phase: a drained broker must
		// never keep a partition from converging.
		id := NodeID(r.IntN(nReplicas))
		if i := slices.Index(s.draining, id); i >= 0 {
			s.draining = slices.Delete(s.draining, i, i+1)
			s.tracef("n%d undrained", id)
		} else {
			s.draining = append(s.draining, id)
			slices.Sort(s.draining)
			s.tracef("n%d draining", id)
		}
	}
	if r.Float64() < s.k.ctrlCrashRate && s.ctrl.up {
		s.ctrl.up = false
		s.ctrl.inc++
		s.tracef("controller crash")
		s.after(1+r.Int64N(20*tickUnits), "crestart", epController, s.startCtrl)
	}
}

// partition cuts links (symmetric, one-way, one node isolated, or halves)
// and heals them later.
func (s *sim) partition() {
	r := s.rFault
	var links [][2]int
	a, b := r.IntN(nReplicas+1), r.IntN(nReplicas+1)
	switch r.IntN(4) {
	case 0: // isolate one node (or the controller) from everyone
		for x := range nEndpoints {
			if x != a {
				links = append(links, [2]int{a, x}, [2]int{x, a})
			}
		}
	case 1: // symmetric between two
		if a != b {
			links = append(links, [2]int{a, b}, [2]int{b, a})
		}
	case 2: // one way
		if a != b {
			links = append(links, [2]int{a, b})
		}
	case 3: // random halves
		side := make([]bool, nEndpoints)
		for i := range side {
			side[i] = r.IntN(2) == 0
		}
		for x := range nEndpoints {
			for y := range nEndpoints {
				if side[x] != side[y] {
					links = append(links, [2]int{x, y})
				}
			}
		}
	}
	for _, l := range links {
		s.cut[l[0]][l[1]] = true
	}
	s.tracef("partition %v", links)
	s.after(1+r.Int64N(40*tickUnits), "heal", -1, func() {
		for _, l := range links {
			s.cut[l[0]][l[1]] = false
		}
		s.tracef("heal %v", links)
	})
}

// startLiveness heals everything and stops the faults and the clients.
func (s *sim) startLiveness() {
	s.live = true
	s.k.dup, s.k.reorder = 0, 0
	s.cut = [nEndpoints][nEndpoints]bool{}
	for _, n := range s.nodes {
		n.pausedUntil = 0
		if !n.up {
			s.startNode(n)
		}
	}
	s.ctrl.pausedUntil = 0
	if !s.ctrl.up {
		s.startCtrl()
	}
	s.tracef("liveness phase")
}

// converged: one leader of the register's epoch, HW at its end, every
// replica following it with the same end and HW.
func (s *sim) converged() bool {
	st := s.reg.state
	if st.Leader == NoLeader {
		return false
	}
	l := s.nodes[st.Leader]
	if !l.up {
		return false
	}
	ls := l.r.Status()
	if ls.Role != RoleLeader || ls.Epoch != st.Epoch || ls.HW != ls.End || ls.Durable != ls.End {
		return false
	}
	for _, n := range s.nodes {
		if !n.up {
			return false
		}
		ns := n.r.Status()
		if ns.Epoch != st.Epoch || ns.End != ls.End || ns.HW != ls.HW || n.disk.syncedEnd() != ls.End {
			return false
		}
	}
	return true
}

// --- clients ---

func encodeRecord(id uint64) []byte {
	b := make([]byte, 12)
	binary.LittleEndian.PutUint64(b, id)
	binary.LittleEndian.PutUint32(b[8:], crc32.ChecksumIEEE(b[:8]))
	return b
}

func decodeRecord(data []byte) (uint64, bool) {
	if len(data) != 12 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(data), crc32.ChecksumIEEE(data[:8]) == binary.LittleEndian.Uint32(data[8:])
}

// client proposes one batch to the node it believes leads.
func (s *sim) client() {
	if s.live {
		return
	}
	r := s.rClient
	if r.IntN(4) == 0 {
		s.clientView = s.reg.state.Clone() // refreshed metadata
	}
	target := s.clientView.Leader
	if target == NoLeader {
		return
	}
	n := s.nodes[target]
	if !n.up || s.paused(n.pausedUntil) {
		return
	}
	rec := &record{id: uint64(len(s.records) + 1), node: target, count: 1 + r.IntN(3), acksAll: r.Float64() >= s.k.acks1}
	base, err := n.r.Propose(rec.count, encodeRecord(rec.id))
	if err != nil {
		s.clientView = s.reg.state.Clone()
		s.drain(n)
		return
	}
	rec.base, rec.epoch, rec.proposed = base, n.r.Status().Epoch, true
	s.records = append(s.records, rec)
	n.r.Wait(base+wal.Offset(rec.count), Token(rec.id), rec.acksAll)
	s.drain(n)
}

// consume reads the committed log from whoever leads, like a consumer:
// offsets only increase and every record matches the committed log.
func (s *sim) consume() {
	st := s.reg.state
	if st.Leader == NoLeader {
		return
	}
	n := s.nodes[st.Leader]
	if !n.up {
		return
	}
	ns := n.r.Status()
	if ns.Role != RoleLeader {
		return
	}
	if st := n.disk.start; s.consumer < st {
		// Retention deleted what the consumer had not read yet: it
		// resets to the earliest offset, as a consumer does.
		s.consumer = st
	}
	l := n.disk.log()
	i, ok := batchAt(l, s.consumer)
	if !ok {
		if s.consumer < ns.HW {
			s.fail("consumer: n%d has no batch at %d below its HW %d", n.id, s.consumer, ns.HW)
		}
		return
	}
	for ; i < len(l) && l[i].End() <= ns.HW; i++ {
		if !s.chk.isCommitted(l[i]) {
			s.fail("consumer: n%d served batch [%d,%d] e%d below HW %d that is not the committed one", n.id, l[i].Base, l[i].Last, l[i].Epoch, ns.HW)
			return
		}
		s.consumer = l[i].End()
	}
}
