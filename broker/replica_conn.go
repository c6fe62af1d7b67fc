package broker

// This file owns a follower fetcher's connection to its leader. The fetcher
// sends one replica Fetch at a time and waits for its answer, so the
// request is written and the answer read on the fetcher's own goroutine:
// no client machinery, no goroutine hand-offs, one read buffer per answer
// (the batches handed to the partitions alias it, as a client's would).
//
// Invariant: a connection that failed in any way (dial, write, read, a
// wrong correlation ID, an undecodable answer, the context's end) is closed
// and never used again; the fetcher dials a new one for its next request.
//
// Owned by one fetcher goroutine; not safe for concurrent use.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// replicaFetchVersion is the Fetch version followers send: the highest
	// this broker serves (api_versions.go), with topic IDs (v13) and the
	// diverging epoch (v12).
	replicaFetchVersion = 13
	// replicaMaxAnswerBytes bounds an answer's frame: the request's
	// MaxBytes plus room for headers, errors and one partition's first
	// batch past the budget.
	replicaMaxAnswerBytes = 2*replicaFetchMaxBytes + 1<<20
	// replicaDialTimeout bounds a dial to the leader.
	replicaDialTimeout = 5 * time.Second
)

// errReplicaConn marks a broken exchange with the leader.
var errReplicaConn = errors.New("replica connection")

// replicaConn is one connection to a leader's Kafka listener.
type replicaConn struct {
	addr string
	conn net.Conn
	r    *bufio.Reader
	fmt  *kmsg.RequestFormatter
	corr int32
	wbuf []byte
}

// dialReplica connects to the leader at addr.
func dialReplica(ctx context.Context, addr, clientID string) (*replicaConn, error) {
	d := net.Dialer{Timeout: replicaDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", errReplicaConn, addr, err)
	}
	return &replicaConn{
		addr: addr, conn: conn, r: bufio.NewReaderSize(conn, 64<<10),
		fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
	}, nil
}

// fetch sends req and returns the leader's answer, within timeout and ctx.
// After an error the connection is closed.
func (c *replicaConn) fetch(ctx context.Context, req *kmsg.FetchRequest, timeout time.Duration) (*kmsg.FetchResponse, error) {
	resp, err := c.exchange(ctx, req, timeout)
	if err != nil {
		c.close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w to %s: %w", errReplicaConn, c.addr, ctx.Err())
		}
		return nil, fmt.Errorf("%w to %s: %w", errReplicaConn, c.addr, err)
	}
	return resp, nil
}

func (c *replicaConn) exchange(ctx context.Context, req *kmsg.FetchRequest, timeout time.Duration) (*kmsg.FetchResponse, error) {
	if c.conn == nil {
		return nil, errors.New("closed")
	}
	if err := c.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	// The context's end interrupts a blocked write or read.
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c.corr++
	req.SetVersion(replicaFetchVersion)
	c.wbuf = c.fmt.AppendRequest(c.wbuf[:0], req, c.corr)
	if _, err := c.conn.Write(c.wbuf); err != nil {
		return nil, err
	}
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil // an unusually large request: do not keep its buffer
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > replicaMaxAnswerBytes {
		return nil, fmt.Errorf("answer frame of %d bytes", n)
	}
	body := make([]byte, n) // the partitions' batches alias it
	if _, err := io.ReadFull(c.r, body); err != nil {
		return nil, err
	}
	return decodeReplicaAnswer(body, c.corr)
}

// decodeReplicaAnswer decodes the frame body of a Fetch answer (header and
// response) to the request numbered corr.
func decodeReplicaAnswer(body []byte, corr int32) (*kmsg.FetchResponse, error) {
	b := kbin.Reader{Src: body}
	if got := b.Int32(); got != corr {
		return nil, fmt.Errorf("answer to request %d, expected %d", got, corr)
	}
	kmsg.SkipTags(&b) // Fetch v12 and later answer with a flexible header
	if err := b.Complete(); err != nil {
		return nil, fmt.Errorf("answer header: %w", err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(replicaFetchVersion)
	if err := resp.ReadFrom(b.Src); err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	return resp, nil
}

// close closes the connection; later fetches fail.
func (c *replicaConn) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}
