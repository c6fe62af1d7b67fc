// Package replybuf keeps the encoding buffers of large consumer fetch
// replies in pools shared by every connection, one per power-of-two size
// class from just above Min to Max. A reply to a consumer reading a backlog
// (a replay from object storage, say) is megabytes; each used to allocate and zero a buffer of its own, which the collector then
// had to reclaim: on a broker serving a fast replay, a share of the CPU
// taken from every other tenant. A connection keeps only a buffer of at
// most Min of its own, so an idle connection pins nothing.
//
// Invariant: a buffer in class c has a capacity of at least 1<<c,
// so a buffer taken for n bytes never grows while a reply of at most n
// bytes is encoded into it.
// Invariant (the caller's): a buffer is back in its pool only after the
// write that used it returned; nothing refers to it after that.
package replybuf

import (
	"math/bits"
	"sync"
)

// Min is the largest reply not pooled: a connection keeps a buffer of
// this size for its replies.
const Min = 1 << 20

// Max is the largest reply buffer pooled; a larger reply (a consumer
// fetch of many partitions, up to the broker's FetchMaxBytes) allocates
// its own, as before, so the pools never hold more than a few buffers of
// this size between collections (a sync.Pool keeps what it holds for two
// of them).
const Max = 16 << 20

// minClass is the class of the smallest pooled buffer: the first power of
// two above Min.
var minClass = bits.Len(uint(Min))

var pools [bits.UintSize]sync.Pool // by class: capacity 1<<class

// class is the class whose buffers hold n bytes, or -1 when n is
// not pooled.
func class(n int) int {
	if n <= Min || n > Max {
		return -1
	}
	return max(bits.Len(uint(n-1)), minClass)
}

// Get returns an empty buffer of capacity at least n from the pools, or
// nil when n is not a pooled size.
func Get(n int) *[]byte {
	c := class(n)
	if c < 0 {
		return nil
	}
	if p, ok := pools[c].Get().(*[]byte); ok {
		*p = (*p)[:0]
		return p
	}
	b := make([]byte, 0, 1<<c)
	return &b
}

// Put returns buf, taken with Get, to the pool of the largest class its
// capacity fills.
func Put(buf *[]byte) {
	c := bits.Len(uint(cap(*buf))) - 1 // 1<<c <= cap
	if c < minClass || 1<<c > Max {
		return
	}
	*buf = (*buf)[:0]
	pools[c].Put(buf)
}

// Conn is one connection's reply buffers: a buffer of its own, kept from
// one reply to the next while it is small, and the shared pools for large
// consumer replies. Take and Done alternate, from the connection's writer.
type Conn struct {
	own    []byte
	pooled *[]byte // the buffer Take last gave from the pools, until Done
}

// Take returns an empty buffer of capacity at least n for the next reply;
// pool says whether a reply above Min may use the shared pools (a
// follower's replica fetch keeps a large buffer of its own instead: it
// comes without pause, from one connection per peer).
func (c *Conn) Take(n int, pool bool) []byte {
	if pool {
		if c.pooled = Get(n); c.pooled != nil {
			return *c.pooled
		}
	}
	if cap(c.own) < n {
		c.own = make([]byte, 0, n) // one allocation, not a chain of growths
	}
	return c.own[:0]
}

// Done takes back buf, the reply encoded into Take's buffer and written:
// to its pool, or kept as the connection's own if its capacity is at most
// keep.
func (c *Conn) Done(buf []byte, keep int) {
	if c.pooled != nil {
		*c.pooled = buf
		Put(c.pooled)
		c.pooled = nil
		return
	}
	c.own = nil
	if cap(buf) <= keep {
		c.own = buf[:0]
	}
}
