package e2e

// A TCP proxy between Kafka clients and one broker that can lose a Produce
// acknowledgement: it reads whole frames in both directions, remembers the
// correlation ids of Produce requests (key 0) on the client→broker side,
// and when the broker's answer to one of them arrives it may drop both
// connections instead of forwarding it. The broker has appended the batch;
// the client never learns so and must retry.
//
// Invariant: a correlation id is recorded before its request is forwarded,
// so the broker cannot answer a Produce the proxy has not seen yet.
//
// Each proxied connection has two pump goroutines; the proxy owns them and
// t.Cleanup closes every connection and waits for them.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxProxiedFrame bounds one frame the proxy buffers.
const maxProxiedFrame = 128 << 20

type cutProxy struct {
	t  testing.TB
	ln net.Listener

	// cut decides, for the nth Produce response (1-based, counted over all
	// connections), whether to drop the connection instead of forwarding it.
	cut func(n int64) bool

	upstream         atomic.Pointer[string]
	produceResponses atomic.Int64 // Produce responses read from the broker
	cuts             atomic.Int64 // of those, how many were dropped

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // guarded by mu
	closed bool                  // guarded by mu
	wg     sync.WaitGroup
}

// newCutProxy listens on a free loopback port. Connections are refused
// (closed) until setUpstream names the broker, so the proxy's address can
// be given to the broker as --kafka-advertise before the broker starts.
func newCutProxy(t testing.TB, cut func(n int64) bool) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: listen: %v", err)
	}
	p := &cutProxy{t: t, ln: ln, cut: cut, conns: make(map[net.Conn]struct{})}
	t.Cleanup(p.close)
	p.wg.Add(1)
	go p.accept()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) setUpstream(addr string) { p.upstream.Store(&addr) }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track registers c so close can reach it; false once the proxy is closed.
func (p *cutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *cutProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *cutProxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	up := p.upstream.Load()
	if up == nil {
		client.Close()
		return
	}
	broker, err := net.DialTimeout("tcp", *up, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(broker) {
		client.Close()
		broker.Close()
		return
	}
	defer p.untrack(broker)

	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			client.Close()
			broker.Close()
		})
	}
	var (
		mu       sync.Mutex
		produces = make(map[int32]bool) // correlation ids of Produce requests in flight; guarded by mu
	)
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { // client → broker
		defer pumps.Done()
		defer closeBoth()
		for {
			frame, err := readKafkaFrame(client)
			if err != nil {
				return
			}
			if len(frame) >= 12 && binary.BigEndian.Uint16(frame[4:]) == 0 { // size, key, version, correlation id
				mu.Lock()
				produces[int32(binary.BigEndian.Uint32(frame[8:]))] = true
				mu.Unlock()
			}
			if _, err := broker.Write(frame); err != nil {
				return
			}
		}
	}()
	go func() { // broker → client
		defer pumps.Done()
		defer closeBoth()
		for {
			frame, err := readKafkaFrame(broker)
			if err != nil {
				return
			}
			if len(frame) >= 8 {
				corr := int32(binary.BigEndian.Uint32(frame[4:]))
				mu.Lock()
				isProduce := produces[corr]
				delete(produces, corr)
				mu.Unlock()
				if isProduce && p.cut(p.produceResponses.Add(1)) {
					p.cuts.Add(1)
					return // the broker appended; the client never hears of it
				}
			}
			if _, err := client.Write(frame); err != nil {
				return
			}
		}
	}()
	pumps.Wait()
}

// readKafkaFrame reads one size-prefixed frame and returns it whole,
// size included.
func readKafkaFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > maxProxiedFrame {
		return nil, fmt.Errorf("proxy: frame size %d", n)
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return frame, nil
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// startBrokerBehindProxy starts a broker that advertises proxy's address,
// so clients that bootstrap through the proxy keep using it.
func startBrokerBehindProxy(t testing.TB, proxy *cutProxy, opts brokerOptions) *broker {
	t.Helper()
	opts.extraArgs = append(opts.extraArgs, "--kafka-advertise", proxy.addr()) // the last flag wins
	b := startBroker(t, opts)
	proxy.setUpstream(b.kafkaAddr)
	return b
}

// newProxiedClient is newClient bootstrapped through the proxy.
func newProxiedClient(t testing.TB, b *broker, proxy *cutProxy, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, b, append([]kgo.Opt{kgo.SeedBrokers(proxy.addr())}, opts...)...)
}
