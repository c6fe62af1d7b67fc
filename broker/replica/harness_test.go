package replica

// A scripted harness for the core tests: nodes with in-memory logs, a
// message queue delivered by hand, storage that completes when told (or at
// once with autoSync), and elections run by the test itself.

import (
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

type tnode struct {
	r        *Replica
	log      []Batch
	hs       HardState
	hsWanted *HardState
	released []Token
	failed   []TokenErr
	down     bool
}

func (n *tnode) end() wal.Offset {
	if len(n.log) == 0 {
		return 0
	}
	return n.log[len(n.log)-1].End()
}

type tcluster struct {
	t        *testing.T
	nodes    []*tnode
	state    State
	queue    []Message
	toCtrl   []Message
	autoSync bool
	budget   int // batches per fetch answer; 0 unlimited
	b        bugs
}

func newCluster(t *testing.T, n int, b bugs) *tcluster {
	c := &tcluster{t: t, autoSync: true, b: b}
	for i := range n {
		cfg := Config{ID: NodeID(i), LagTicks: 10, FetchWaitTicks: 3, RetryTicks: 1, UnreachableTicks: 10, bugs: b}
		c.nodes = append(c.nodes, &tnode{r: New(cfg, HardState{}, nil, 0, 0)})
		c.state.Replicas = append(c.state.Replicas, NodeID(i))
	}
	c.state.Leader = NoLeader
	return c
}

// drain carries out node i's Ready until it has none.
func (c *tcluster) drain(i int) {
	n := c.nodes[i]
	for n.r.HasReady() {
		rd := n.r.Ready()
		if rd.Truncate >= 0 {
			for len(n.log) > 0 && n.log[len(n.log)-1].End() > rd.Truncate {
				n.log = n.log[:len(n.log)-1]
			}
		}
		if rd.HardState != nil {
			hs := *rd.HardState
			n.hsWanted = &hs
		}
		for _, b := range rd.Appends {
			n.log = append(n.log, b.Clone())
		}
		for _, m := range rd.Messages {
			if m.Type == MsgFetchResp && m.ReadTo > m.ReadFrom {
				for _, b := range n.log {
					if b.Base >= m.ReadFrom && b.Base < m.ReadTo && (c.budget == 0 || len(m.Batches) < c.budget) {
						m.Batches = append(m.Batches, b.Clone())
					}
				}
			}
			if m.To == ControllerNode {
				c.toCtrl = append(c.toCtrl, m)
			} else {
				c.queue = append(c.queue, m)
			}
		}
		n.released = append(n.released, rd.Released...)
		n.failed = append(n.failed, rd.Failed...)
		n.r.Advance()
		if rd.Truncate >= 0 {
			n.r.Truncated(n.end())
		}
		if c.autoSync {
			c.syncHS(i)
			n.r.Durable(n.end())
		}
	}
}

// syncHS completes node i's hard state write.
func (c *tcluster) syncHS(i int) {
	n := c.nodes[i]
	if n.hsWanted != nil {
		n.hs = *n.hsWanted
		n.hsWanted = nil
		n.r.HardStateDurable(n.hs)
	}
}

// deliver hands queued messages to their live nodes until none is left;
// messages to or from a down node are dropped.
func (c *tcluster) deliver() { c.deliverN(-1) }

// deliverN delivers at most k messages (k < 0: all).
func (c *tcluster) deliverN(k int) {
	for n := 0; len(c.queue) > 0 && n != k; {
		if n > 10000 {
			c.t.Fatal("messages never settle")
		}
		m := c.queue[0]
		c.queue = c.queue[1:]
		to := c.nodes[m.To]
		if to.down || (m.From >= 0 && c.nodes[m.From].down) {
			continue // lost
		}
		n++
		to.r.Step(m)
		c.drain(int(m.To))
	}
}

// settle delivers messages and ticks until the cluster is quiet for a while.
func (c *tcluster) settle(ticks int) {
	for range ticks {
		c.deliver()
		for i, n := range c.nodes {
			if !n.down {
				n.r.Tick()
				c.drain(i)
			}
		}
	}
	c.deliver()
}

// elect runs a fence round at epoch e among voters and publishes leader.
func (c *tcluster) elect(e wal.Epoch, leader int, voters ...int) {
	c.t.Helper()
	c.toCtrl = nil
	for _, v := range voters {
		c.nodes[v].r.Step(Message{Type: MsgFence, From: ControllerNode, To: NodeID(v), Epoch: e})
		c.drain(v)
	}
	acks := 0
	for _, m := range c.toCtrl {
		if m.Type == MsgFenceAck && m.Epoch == e && m.Err == ErrNone {
			acks++
		}
	}
	if acks != len(voters) {
		c.t.Fatalf("epoch %d: %d fence answers from %d voters", e, acks, len(voters))
	}
	c.state.Epoch, c.state.Leader = e, NodeID(leader)
	c.state.Version++
	for i, n := range c.nodes {
		if !n.down {
			n.r.SetState(c.state)
			c.drain(i)
		}
	}
}

// crash stops node i; restart brings it back from its log and hard state.
func (c *tcluster) crash(i int) {
	c.nodes[i].down = true
	c.queue = slices.DeleteFunc(c.queue, func(m Message) bool { return m.From == NodeID(i) || m.To == NodeID(i) })
}

func (c *tcluster) restart(i int) {
	n := c.nodes[i]
	cfg := n.r.cfg
	n.r = New(cfg, n.hs, chainOf(n.log), n.end(), 0)
	n.down = false
	n.r.SetState(c.state)
	c.drain(i)
}

func (c *tcluster) propose(i int, count int, tok Token, acksAll bool) wal.Offset {
	c.t.Helper()
	n := c.nodes[i]
	base, err := n.r.Propose(count, []byte{byte(tok)})
	if err != nil {
		c.t.Fatalf("n%d propose: %v", i, err)
	}
	n.r.Wait(base+wal.Offset(count), tok, acksAll)
	c.drain(i)
	return base
}

func hasToken(ts []Token, t Token) bool { return slices.Contains(ts, t) }
