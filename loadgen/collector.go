package loadgen

// This file owns the run's measurements: counters (atomics), the two
// latency histograms, per-partition consume positions for replay
// detection, errors by kind, and the consumer-crash bookkeeping.
//
// Invariant: unique + duplicates == consumed. With ordered partitions
// (Kafka) a record is a duplicate when its offset is at or below the
// highest one delivered for its partition; otherwise (JetStream, one
// sequence per stream) when its sequence was delivered before.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

type collector struct {
	clock   Clock
	ordered bool // System.OrderedPartitions

	e2eOn atomic.Bool

	sent, acked, failed, ackBytes   atomic.Int64
	consumed, unique, dup, conBytes atomic.Int64
	prefilled                       atomic.Int64
	lastAck, lastDeliver            atomic.Int64   // Unix nanos
	firstDeliver                    atomic.Int64   // Unix nanos
	behind                          []atomic.Int64 // per producer: scheduled sends due and not yet made

	ack, e2e *Histogram

	mu      sync.Mutex
	maxSeen map[int32]int64  // guarded by mu: highest offset delivered per partition (ordered)
	seen    bitset           // guarded by mu: sequences delivered (unordered)
	errs    map[string]int64 // guarded by mu
	owner   map[int32]int    // guarded by mu: member that delivered each partition last
	crash   crashState       // guarded by mu
}

type crashState struct {
	member      int
	at          time.Time
	orphans     map[int32]bool
	resumed     bool
	pause       time.Duration
	replayed    int64 // records delivered again (already seen) after the kill
	redelivered int64 // deliveries the system flagged as redeliveries after the kill
}

func newCollector(clock Clock, ordered bool, producers int) *collector {
	c := &collector{
		clock:   clock,
		ordered: ordered,
		behind:  make([]atomic.Int64, producers),
		ack:     NewHistogram(),
		e2e:     NewHistogram(),
		maxSeen: map[int32]int64{},
		errs:    map[string]int64{},
		owner:   map[int32]int{},
		crash:   crashState{member: -1},
	}
	c.e2eOn.Store(true)
	return c
}

// acknowledged records the outcome of one publish whose latency counts from base.
func (c *collector) acknowledged(base time.Time, size int, err error) {
	now := c.clock.Now()
	if err != nil {
		c.failed.Add(1)
		c.recordError("produce", err)
		return
	}
	c.acked.Add(1)
	c.ackBytes.Add(int64(size))
	c.ack.Record(now.Sub(base))
	c.lastAck.Store(now.UnixNano())
}

type memberSink struct {
	c  *collector
	id int
}

func (s memberSink) Deliver(batch []Delivered) { s.c.deliver(s.id, batch) }
func (s memberSink) Error(err error)           { s.c.recordError("consume", err) }

func (c *collector) deliver(member int, batch []Delivered) {
	now := c.clock.Now()
	var lat []time.Duration
	var uniq, dups, bytes int64
	c.mu.Lock()
	for _, d := range batch {
		c.owner[d.Partition] = member
		bytes += int64(d.Bytes)
		var dup bool
		if c.ordered {
			prev, seen := c.maxSeen[d.Partition]
			dup = seen && d.Offset <= prev
			if !dup {
				c.maxSeen[d.Partition] = d.Offset
			}
		} else {
			dup = c.seen.testAndSet(d.Offset)
		}
		if dup {
			dups++
		} else {
			uniq++
			if !d.Scheduled.IsZero() {
				lat = append(lat, now.Sub(d.Scheduled))
			}
		}
		cs := &c.crash
		if cs.member >= 0 && member != cs.member {
			if dup {
				cs.replayed++
			}
			if d.Redelivered {
				cs.redelivered++
			}
			// Kafka: the killed member's partitions flow again (after the
			// session timeout and a rebalance). JetStream has no partition
			// ownership: any delivery to a survivor counts.
			if !cs.resumed && (dup || !c.ordered || cs.orphans[d.Partition]) {
				cs.resumed, cs.pause = true, now.Sub(cs.at)
			}
		}
	}
	c.mu.Unlock()
	c.consumed.Add(int64(len(batch)))
	c.unique.Add(uniq)
	c.dup.Add(dups)
	c.conBytes.Add(bytes)
	c.lastDeliver.Store(now.UnixNano())
	c.firstDeliver.CompareAndSwap(0, now.UnixNano())
	if c.e2eOn.Load() {
		for _, l := range lat {
			c.e2e.Record(l)
		}
	}
}

// owners is how many distinct members currently own (last delivered) a partition.
func (c *collector) owners() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[int]bool{}
	for _, m := range c.owner {
		seen[m] = true
	}
	return len(seen)
}

// markKill records that member is being killed now; its orphans are the
// partitions it delivered last.
func (c *collector) markKill(member int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	orphans := map[int32]bool{}
	for p, m := range c.owner {
		if m == member {
			orphans[p] = true
		}
	}
	c.crash = crashState{member: member, at: c.clock.Now(), orphans: orphans}
}

func (c *collector) crashResult() crashState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crash
}

func (c *collector) recordError(op string, err error) {
	kind := op + ": " + errorKind(err)
	c.mu.Lock()
	c.errs[kind]++
	c.mu.Unlock()
}

func (c *collector) errorCounts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.errs))
	for k, v := range c.errs {
		out[k] = v
	}
	return out
}

func (c *collector) errorTotal() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, v := range c.errs {
		n += v
	}
	return n
}

// available is what consumers could have read: prefilled plus acknowledged.
func (c *collector) lag() int64 {
	return max(c.prefilled.Load()+c.acked.Load()-c.unique.Load(), 0)
}

// backlog is what the schedule asked for and consumers have not read yet:
// it includes sends a stalled producer has not even made.
func (c *collector) backlog() int64 {
	var behind int64
	for i := range c.behind {
		behind += c.behind[i].Load()
	}
	return max(c.prefilled.Load()+c.sent.Load()+behind-c.unique.Load(), 0)
}

// errorKind names an error class: the Kafka error name, a timeout, or the
// first words of the message.
func errorKind(err error) string {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		s = s[i+2:]
	}
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// bitset is a growable set of non-negative integers.
type bitset []uint64

// testAndSet reports whether i was in the set and adds it.
func (b *bitset) testAndSet(i int64) bool {
	if i < 0 {
		return false
	}
	w, bit := int(i/64), uint64(1)<<(uint(i)%64)
	if w >= len(*b) {
		*b = append(*b, make([]uint64, w-len(*b)+1+len(*b)/2)...)
	}
	was := (*b)[w]&bit != 0
	(*b)[w] |= bit
	return was
}
