package kafka

// replybuf.go keeps the encoding buffers of large consumer fetch replies in
// pools shared by every connection, one per power-of-two size class from
// just above maxKeptReplyBuffer to maxPooledReply. A reply to a consumer
// reading a backlog (a replay from object storage, say) is megabytes; each
// used to allocate and zero a buffer of its own, which the collector then
// had to reclaim: on a broker serving a fast replay, a share of the CPU
// taken from every other tenant. A connection still keeps only a small
// buffer of its own (keepReplyBuffer), so an idle connection pins nothing.
//
// Invariant: a buffer in class c has a capacity of at least classSize(c),
// so a buffer taken for n bytes never grows while a reply of at most n
// bytes is encoded into it.
// Invariant: a buffer is back in its pool only after the write that used
// it returned; nothing refers to it after that.

import (
	"math/bits"
	"sync"
)

// maxPooledReply is the largest reply buffer pooled; a larger reply (a
// fetch near the broker's FetchMaxBytes cap) allocates its own.
const maxPooledReply = 64 << 20

// minPooledClass is the class of the smallest pooled buffer: the first
// power of two above maxKeptReplyBuffer.
var minPooledClass = bits.Len(uint(maxKeptReplyBuffer))

var replyPools [bits.UintSize]sync.Pool // by class: capacity 1<<class

// replyClass is the class whose buffers hold n bytes, or -1 when n is
// not pooled.
func replyClass(n int) int {
	if n <= maxKeptReplyBuffer || n > maxPooledReply {
		return -1
	}
	return max(bits.Len(uint(n-1)), minPooledClass)
}

// getReplyBuffer returns an empty buffer of capacity at least n from the
// pools, or nil when n is not a pooled size.
func getReplyBuffer(n int) *[]byte {
	c := replyClass(n)
	if c < 0 {
		return nil
	}
	if p, ok := replyPools[c].Get().(*[]byte); ok {
		*p = (*p)[:0]
		return p
	}
	b := make([]byte, 0, 1<<c)
	return &b
}

// putReplyBuffer returns buf, taken with getReplyBuffer, to the pool of
// the largest class its capacity fills.
func putReplyBuffer(buf *[]byte) {
	c := bits.Len(uint(cap(*buf))) - 1 // 1<<c <= cap
	if c < minPooledClass || 1<<c > maxPooledReply {
		return
	}
	*buf = (*buf)[:0]
	replyPools[c].Put(buf)
}
