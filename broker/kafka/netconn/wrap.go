package netconn

// This file owns the connection wrappers of the inter-broker listener,
// which tells a connection's protocol by its first byte and hands an HTTP
// one to an http.Server: Peeked gives back the byte read to tell it,
// CloseHook uncounts the connection when the HTTP server closes it, and
// Queue is the listener that server accepts from.
//
// Invariant: a Peeked connection yields every byte the connection sent, in
// order, the peeked ones first.
// Invariant: a CloseHook's OnClose runs once, after the connection closed,
// however many times Close is called.
// Invariant: Queue.Put does not block once Close was called: it hands the
// connection to an Accept or returns false, and then the caller closes it.
//
// Queue is safe for the accept loop and the server's goroutine at once.

import (
	"bufio"
	"net"
	"sync"
)

// Peeked is a connection whose first bytes were read ahead into R: reads
// drain R before they reach the connection.
type Peeked struct {
	net.Conn
	R *bufio.Reader // reads Conn
}

func (c *Peeked) Read(p []byte) (int, error) { return c.R.Read(p) }

// CloseHook runs OnClose once, at its first Close.
type CloseHook struct {
	net.Conn
	OnClose func()
	once    sync.Once
}

func (c *CloseHook) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.OnClose)
	return err
}

// Queue is a net.Listener whose connections are put in by an accept loop
// (Put): the inter-broker HTTP server serves from it.
type Queue struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

// NewQueue is an open queue that reports addr as its address.
func NewQueue(addr net.Addr) *Queue {
	return &Queue{ch: make(chan net.Conn), done: make(chan struct{}), addr: addr}
}

func (q *Queue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *Queue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *Queue) Addr() net.Addr { return q.addr }

// Put hands c to the server; false once the queue is closed.
func (q *Queue) Put(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		return false
	}
}
