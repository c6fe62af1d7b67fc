package netproxy

// This file owns the faults of a Proxy: the Direction they apply to, the
// Faults of one direction, and the setters. Changes are serialised by
// Proxy.mu and published as a new immutable faultState, whose changed channel
// is closed when it is replaced, so a pump waiting on a delay or a stall
// wakes and re-reads the faults in force.
//
// Invariant: a faultState is never modified after it is stored in
// Proxy.state.

import (
	"fmt"
	"math"
	"time"
)

// Direction selects the direction(s) of a link a fault applies to.
type Direction uint8

const (
	// ToUpstream is the direction from the client that dialed the proxy to
	// the upstream behind it.
	ToUpstream Direction = 1 << iota
	// ToClient is the direction from the upstream back to the client.
	ToClient
	// BothWays is ToUpstream and ToClient.
	BothWays = ToUpstream | ToClient
)

// index numbers the two directions for per-direction arrays.
const (
	idxToUpstream = 0
	idxToClient   = 1
)

// indexes returns the array indexes of the directions in d.
func (d Direction) indexes() []int {
	var out []int
	if d&ToUpstream != 0 {
		out = append(out, idxToUpstream)
	}
	if d&ToClient != 0 {
		out = append(out, idxToClient)
	}
	return out
}

func (d Direction) String() string {
	switch d {
	case ToUpstream:
		return "to-upstream"
	case ToClient:
		return "to-client"
	case BothWays:
		return "both-ways"
	default:
		return fmt.Sprintf("direction(%d)", uint8(d))
	}
}

var dirNames = [2]string{"to-upstream", "to-client"}

// Faults are the faults of one direction. The zero value is a healthy link.
type Faults struct {
	// Delay holds each chunk this long after it was read, Jitter more or less
	// (uniform); order is kept.
	Delay, Jitter time.Duration
	// DropRate is the probability in [0, 1] that a chunk is lost, which cuts
	// its connection.
	DropRate float64
	// Blackhole discards every byte (and end of stream).
	Blackhole bool
	// Stall holds every byte until lifted, pushing back on the sender.
	Stall bool
}

// Validate reports a fault that cannot be applied.
func (f Faults) Validate() error {
	if f.Delay < 0 || f.Jitter < 0 {
		return fmt.Errorf("netproxy: negative delay %v or jitter %v", f.Delay, f.Jitter)
	}
	if math.IsNaN(f.DropRate) || f.DropRate < 0 || f.DropRate > 1 {
		return fmt.Errorf("netproxy: drop rate %v outside [0, 1]", f.DropRate)
	}
	return nil
}

// faultState is what pumps read per chunk.
type faultState struct {
	dirs    [2]Faults
	changed chan struct{} // closed when this state is replaced
}

// Faults returns the faults in force in direction d, which must be ToUpstream
// or ToClient.
func (p *Proxy) Faults(d Direction) Faults {
	st := p.state.Load()
	if d == ToClient {
		return st.dirs[idxToClient]
	}
	return st.dirs[idxToUpstream]
}

// Set replaces the faults of the directions in d.
func (p *Proxy) Set(d Direction, f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	p.update(func(dirs *[2]Faults) {
		for _, i := range d.indexes() {
			dirs[i] = f
		}
	})
	return nil
}

// Delay holds chunks in the directions d for delay ± jitter before writing
// them. Zero delay and jitter remove the fault.
func (p *Proxy) Delay(d Direction, delay, jitter time.Duration) error {
	if err := (Faults{Delay: delay, Jitter: jitter}).Validate(); err != nil {
		return err
	}
	p.update(func(dirs *[2]Faults) {
		for _, i := range d.indexes() {
			dirs[i].Delay, dirs[i].Jitter = delay, jitter
		}
	})
	return nil
}

// Drop loses each chunk in the directions d with probability rate, cutting
// its connection (see the package doc for why). Zero removes the fault.
func (p *Proxy) Drop(d Direction, rate float64) error {
	if err := (Faults{DropRate: rate}).Validate(); err != nil {
		return err
	}
	p.update(func(dirs *[2]Faults) {
		for _, i := range d.indexes() {
			dirs[i].DropRate = rate
		}
	})
	return nil
}

// Blackhole discards every byte in the directions d until Heal.
func (p *Proxy) Blackhole(d Direction) {
	p.update(func(dirs *[2]Faults) {
		for _, i := range d.indexes() {
			dirs[i].Blackhole = true
		}
	})
}

// Stall holds every byte in the directions d until Heal, then delivers them.
func (p *Proxy) Stall(d Direction) {
	p.update(func(dirs *[2]Faults) {
		for _, i := range d.indexes() {
			dirs[i].Stall = true
		}
	})
}

// Cut resets every connection now and every new one at accept until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.connList()
	p.mu.Unlock()
	p.log.Info().Int("connections", len(conns)).Msg("cut")
	for _, c := range conns {
		p.cutConn(c, "cut")
	}
}

// Heal removes every fault in both directions and lifts Cut. Connections
// that lost bytes to a blackhole are cut (a stream never resumes with a
// hole); held and delayed bytes are released.
func (p *Proxy) Heal() {
	p.update(func(dirs *[2]Faults) {
		*dirs = [2]Faults{}
		p.cut = false
	})
}

// update applies change to a copy of the faults under p.mu, publishes it,
// wakes the pumps and cuts the connections whose lost bytes are no longer
// hidden by a blackhole.
func (p *Proxy) update(change func(*[2]Faults)) {
	p.mu.Lock()
	old := p.state.Load()
	next := &faultState{dirs: old.dirs, changed: make(chan struct{})}
	change(&next.dirs)
	p.state.Store(next)
	close(old.changed)
	var gapped []*conn
	for c := range p.conns {
		for i := range next.dirs {
			if c.lost[i].Load() && !next.dirs[i].Blackhole {
				gapped = append(gapped, c)
				break
			}
		}
	}
	p.mu.Unlock()
	p.log.Info().
		Interface(dirNames[idxToUpstream], next.dirs[idxToUpstream]).
		Interface(dirNames[idxToClient], next.dirs[idxToClient]).
		Msg("faults set")
	for _, c := range gapped {
		p.cutConn(c, "blackhole lifted over lost bytes")
	}
}
