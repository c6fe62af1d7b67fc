package cache

// evict.go owns the cache's eviction: which entries leave to make room for a
// filled value, and the count of cached bytes. Ristretto stores the entries
// and accounts their cost; the victims are chosen here, before each Set, so
// that ristretto always has room and admits the value.
//
// Why not ristretto's own policy: its TinyLFU admission refuses a new key
// whose access count is below that of sampled residents. In a sequential
// replay every chunk is new and the residents were read before, so once the
// cache is full nearly every new chunk is refused: with one reader and a
// read-ahead window of 4 over 2,000 chunks in a 64-chunk cache, 8,902 fills
// instead of 2,000, and readers lagging each other shared nothing.
//
// The order here is a CLOCK with small use counts (GCLOCK): entries sit in
// a FIFO queue; the hand takes the oldest, and evicts it if its count is 0,
// else decrements the count and moves it to the back. A hit adds 1, up to
// maxUses. An entry filled for a Get starts at 1 (it was just read); one
// filled by a prefetch starts at maxUses, because its read is still to
// come: it must outlast the entries read since, or read-ahead would evict
// its own chunks before the reader gets to them. Entries read again and
// again (footers, the chunks many consumers share) keep their counts up and
// outlast a replay streaming through.
//
// Invariant: queue holds exactly the entries ristretto holds, and bytes is
// the sum of their costs, at most MaxBytes. Both are guarded by Cache.emu,
// which also serialises every Set and Del on ristretto, so ristretto's used
// cost equals bytes whenever emu is free.

import "sync/atomic"

// maxUses caps an entry's use count: an entry survives at most maxUses+1
// passes of the hand without a hit.
const maxUses = 3

// entry is what ristretto stores under a key.
type entry struct {
	key  string
	data []byte
	cost int64
	// uses, in [0, maxUses], is raised by hits and lowered by the hand.
	uses atomic.Int32
}

// entryCost is the cost of val in the byte budget: its length, at least 1
// so that empty entries are bounded too.
func entryCost(val []byte) int64 { return max(int64(len(val)), 1) }

// touch records a hit on e. It writes only while the count is below the
// cap, so many readers of one hot entry do not contend on it; a lost race
// with the hand or another reader loses one count, which is harmless.
func (e *entry) touch() {
	if n := e.uses.Load(); n < maxUses {
		e.uses.CompareAndSwap(n, n+1)
	}
}

// land caches val under key, evicting older entries first if the budget
// needs room; uses is the entry's initial count. It returns once ristretto
// holds the entry, so the next lookup sees it. Only fill goroutines call
// land (see the wg invariant in cache.go).
func (c *Cache) land(key string, val []byte, uses int32) {
	e := &entry{key: key, data: val, cost: entryCost(val)}
	e.uses.Store(uses)
	if e.cost > c.cfg.MaxBytes {
		c.stats.rejected.Add(1)
		return
	}
	c.emu.Lock()
	defer c.emu.Unlock()
	if c.makeRoomLocked(e.cost) > 0 {
		// The deletions must reach ristretto's accounting before the Set,
		// or its policy would see no room and might refuse the entry.
		c.rc.Wait()
	}
	if !c.rc.Set(key, e, e.cost) {
		c.stats.rejected.Add(1) // ristretto's set buffer was full
		return
	}
	c.rc.Wait()
	if _, ok := c.rc.GetTTL(key); !ok {
		// Refused despite the room made (a broken assumption about
		// ristretto, not a failure): the entry is simply not cached.
		c.stats.rejected.Add(1)
		return
	}
	c.queue = append(c.queue, e)
	c.bytes.Add(e.cost)
}

// makeRoomLocked evicts entries until cost more bytes fit in the budget,
// and returns how many it evicted. The hand decrements at most maxUses
// counts per queued entry in one call, so the loop ends even while readers
// keep hitting every entry.
func (c *Cache) makeRoomLocked(cost int64) int {
	evicted := 0
	spare := maxUses * len(c.queue)
	for c.bytes.Load()+cost > c.cfg.MaxBytes {
		e := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		if spare > 0 && e.uses.Load() > 0 {
			spare--
			e.uses.Add(-1) // only the hand lowers counts: no underflow
			c.queue = append(c.queue, e)
			continue
		}
		c.rc.Del(e.key)
		c.bytes.Add(-e.cost)
		c.stats.evicted.Add(1)
		evicted++
	}
	return evicted
}
