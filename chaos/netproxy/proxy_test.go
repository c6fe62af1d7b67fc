package netproxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestRoundTripLargeTransfer(t *testing.T) {
	up := newServer(t, echo)
	p := newProxy(t, up.Addr(), 1)
	c := dial(t, p.Addr())

	const size = 8 << 20
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	werr := make(chan error, 1)
	go func() {
		// Write in uneven pieces while the echo comes back concurrently.
		rest := data
		for len(rest) > 0 {
			n := min(len(rest), 1+rng.IntN(100<<10))
			if _, err := c.Write(rest[:n]); err != nil {
				werr <- err
				return
			}
			rest = rest[n:]
		}
		werr <- c.CloseWrite()
	}()
	c.SetReadDeadline(time.Now().Add(waitFor))
	got, err := io.ReadAll(c) // ends at the echo's end of stream, passed through the proxy
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := recvWithin(t, werr, "the writer to finish"); err != nil {
		t.Fatalf("write: %v", err)
	}
	if len(got) != size || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("echo of %d bytes came back as %d bytes with another checksum", size, len(got))
	}
	eventually(t, "counters to settle and the connection to close", func() bool {
		s := p.Stats()
		return s.ToUpstream.Forwarded == size && s.ToClient.Forwarded == size && s.Active == 0
	})
	s := p.Stats()
	if s.Accepted != 1 || s.Cut != 0 || s.ToUpstream.Dropped != 0 || s.ToClient.Dropped != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// ping writes a numbered message and reads its echo.
func ping(c net.Conn, i int) error {
	msg := binary.BigEndian.AppendUint64(nil, uint64(i))
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return errors.New("echo differs")
	}
	return nil
}

func TestDelayHoldsAtLeastD(t *testing.T) {
	cases := []struct {
		name          string
		dir           Direction
		delay, jitter time.Duration
		atLeast       time.Duration
	}{
		{"to-upstream", ToUpstream, 80 * time.Millisecond, 0, 80 * time.Millisecond},
		{"to-client", ToClient, 80 * time.Millisecond, 0, 80 * time.Millisecond},
		{"both-ways-add-up", BothWays, 50 * time.Millisecond, 0, 100 * time.Millisecond},
		{"jitter-at-least-d-minus-jitter", ToUpstream, 80 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := newServer(t, echo)
			p := newProxy(t, up.Addr(), 3)
			if err := p.Delay(tc.dir, tc.delay, tc.jitter); err != nil {
				t.Fatal(err)
			}
			c := dial(t, p.Addr())
			c.SetDeadline(time.Now().Add(waitFor))
			for i := range 5 {
				start := time.Now() // monotonic
				if err := ping(c, i); err != nil {
					t.Fatalf("ping %d: %v", i, err)
				}
				if rtt := time.Since(start); rtt < tc.atLeast {
					t.Fatalf("ping %d took %v, want at least %v", i, rtt, tc.atLeast)
				}
			}
		})
	}
}

func TestDelayWithJitterKeepsOrder(t *testing.T) {
	up := newServer(t, echo)
	p := newProxy(t, up.Addr(), 4)
	if err := p.Delay(BothWays, 5*time.Millisecond, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	var sent bytes.Buffer
	werr := make(chan error, 1)
	go func() {
		for i := range 2000 {
			msg := binary.BigEndian.AppendUint32(nil, uint32(i))
			sent.Write(msg)
			if _, err := c.Write(msg); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	got := make([]byte, 2000*4)
	c.SetReadDeadline(time.Now().Add(waitFor))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := recvWithin(t, werr, "the writer to finish"); err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, sent.Bytes()) {
		t.Fatal("delayed chunks were reordered")
	}
}

func TestHealReleasesHeldData(t *testing.T) {
	cases := []struct {
		name string
		set  func(p *Proxy)
	}{
		{"delay", func(p *Proxy) { _ = p.Delay(ToUpstream, time.Hour, 0) }},
		{"stall", func(p *Proxy) { p.Stall(ToUpstream) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := newServer(t, echo)
			p := newProxy(t, up.Addr(), 5)
			c := dial(t, p.Addr())
			if err := ping(c, 0); err != nil { // the connection is up before the fault
				t.Fatal(err)
			}
			tc.set(p)
			const size = 1 << 20
			data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
			werr := make(chan error, 1)
			go func() {
				_, err := c.Write(data)
				werr <- err
			}()
			// Held, not lost: nothing reaches the upstream until Heal.
			eventually(t, "the proxy to read the first bytes", func() bool {
				return p.Stats().ToUpstream.Forwarded == 8 // the ping only
			})
			if got := up.received.Load(); got != 8 {
				t.Fatalf("upstream received %d bytes while held", got)
			}
			p.Heal()
			readFull(t, c, data)
			if err := recvWithin(t, werr, "the writer to finish"); err != nil {
				t.Fatalf("write: %v", err)
			}
			if s := p.Stats(); s.Cut != 0 || s.ToUpstream.Dropped != 0 {
				t.Fatalf("held data was lost: %+v", s)
			}
		})
	}
}

func TestBlackholeOneDirection(t *testing.T) {
	cases := []struct {
		name string
		dir  Direction
	}{
		{"to-client", ToClient},
		{"to-upstream", ToUpstream},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			accepted := make(chan net.Conn, 1)
			up := newServer(t, accepter(accepted))
			p := newProxy(t, up.Addr(), 6)
			client := dial(t, p.Addr())
			server := recvWithin(t, accepted, "the upstream to accept the proxied connection")
			p.Blackhole(tc.dir)

			// Name each side by whether its outgoing direction is blackholed.
			var lossy, open, lossySink, openSink net.Conn = server, client, client, server
			lostIdx := idxToClient
			if tc.dir == ToUpstream {
				lossy, open, lossySink, openSink = client, server, server, client
				lostIdx = idxToUpstream
			}
			// The other direction still flows.
			if _, err := open.Write([]byte("flows")); err != nil {
				t.Fatal(err)
			}
			readFull(t, openSink, []byte("flows"))
			// This one is read and discarded.
			if _, err := lossy.Write([]byte("vanishes")); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the bytes to be discarded", func() bool {
				return p.Faults(tc.dir).Blackhole && dropped(p, lostIdx) == int64(len("vanishes"))
			})
			expectNothing(t, lossySink)

			// A new connection is accepted but goes nowhere that way either.
			client2 := dial(t, p.Addr())
			server2 := recvWithin(t, accepted, "the upstream to accept the second proxied connection")
			lossy2 := server2
			if tc.dir == ToUpstream {
				lossy2 = net.Conn(client2)
			}
			if _, err := lossy2.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the new connection's byte to be discarded", func() bool {
				return dropped(p, lostIdx) == int64(len("vanishes")+1)
			})

			// Healing never resumes a stream with a hole: both are cut.
			p.Heal()
			expectClosed(t, client)
			expectClosed(t, client2)
			if s := p.Stats(); s.Cut != 2 {
				t.Fatalf("cut %d connections at heal, want 2: %+v", s.Cut, s)
			}
		})
	}
}

func TestBlackholeNeverHoldsUpASender(t *testing.T) {
	accepted := make(chan net.Conn, 1)
	up := newServer(t, accepter(accepted)) // never reads: the upstream is stuck
	p := newProxy(t, up.Addr(), 14)
	client := dial(t, p.Addr())
	recvWithin(t, accepted, "the upstream to accept the proxied connection")
	const size = 64 << 20 // more than the queue and every socket buffer hold
	werr := make(chan error, 1)
	go func() {
		_, err := client.Write(make([]byte, size))
		werr <- err
	}()
	eventually(t, "the queue to the stuck upstream to fill", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for c := range p.conns {
			return len(c.queues[idxToUpstream]) == queueLen
		}
		return false
	})
	p.Blackhole(ToUpstream) // the reader, blocked on the full queue, now discards
	select {
	case err := <-werr:
		if err != nil {
			t.Fatalf("write: %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("the sender is still blocked on a blackholed link")
	}
	if s := p.Stats(); s.ToUpstream.Dropped == 0 {
		t.Fatalf("nothing dropped: %+v", s)
	}
}

func dropped(p *Proxy, idx int) int64 {
	s := p.Stats()
	if idx == idxToClient {
		return s.ToClient.Dropped
	}
	return s.ToUpstream.Dropped
}

func TestBlackholeSwallowsEndOfStream(t *testing.T) {
	accepted := make(chan net.Conn, 1)
	up := newServer(t, accepter(accepted))
	p := newProxy(t, up.Addr(), 7)
	client := dial(t, p.Addr())
	server := recvWithin(t, accepted, "the upstream to accept the proxied connection")
	p.Blackhole(ToUpstream)
	if err := client.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The server sees a hung connection, not an end of stream; the other way
	// still flows.
	if _, err := server.Write([]byte("still")); err != nil {
		t.Fatal(err)
	}
	readFull(t, client, []byte("still"))
	eventually(t, "the end of stream to be swallowed", func() bool {
		return p.Stats().Active == 1 && connLost(p, idxToUpstream)
	})
	expectNothing(t, server)
	p.Heal()
	expectClosed(t, client)
}

func connLost(p *Proxy, idx int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if c.lost[idx].Load() {
			return true
		}
	}
	return false
}

// dropIndex is the message at which a proxy seeded with seed cuts the first
// connection under the given drop rate, from the same generator as conn.read.
func dropIndex(seed uint64, rate float64) int {
	rng := rand.New(rand.NewPCG(seed, 1<<1|idxToUpstream))
	for i := 0; ; i++ {
		dropDraw := rng.Float64()
		rng.Float64() // jitter
		if dropDraw < rate {
			return i
		}
	}
}

func TestDropIsSeededAndCuts(t *testing.T) {
	const rate = 0.1
	run := func(seed uint64) (int, Stats) {
		up := newServer(t, echo)
		p := newProxy(t, up.Addr(), seed)
		if err := p.Drop(ToUpstream, rate); err != nil {
			t.Fatal(err)
		}
		c := dial(t, p.Addr())
		c.SetDeadline(time.Now().Add(waitFor))
		for i := range 1000 {
			if err := ping(c, i); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("ping %d: %v", i, err)
				}
				eventually(t, "the cut to be counted", func() bool {
					s := p.Stats()
					return s.Active == 0 && s.ToUpstream.Forwarded == int64(8*i)
				})
				return i, p.Stats()
			}
		}
		t.Fatal("no drop in 1000 messages")
		return 0, Stats{}
	}
	for _, seed := range []uint64{11, 12, 13} {
		want := dropIndex(seed, rate)
		for attempt := range 2 {
			got, s := run(seed)
			if got != want {
				t.Fatalf("seed %d attempt %d: cut at message %d, want %d", seed, attempt, got, want)
			}
			if s.Cut != 1 || s.ToUpstream.DropCuts != 1 || s.ToUpstream.Dropped != 8 ||
				s.ToUpstream.Forwarded != int64(8*want) {
				t.Fatalf("seed %d: stats %+v", seed, s)
			}
		}
	}
}

func TestDropRates(t *testing.T) {
	up := newServer(t, echo)
	p := newProxy(t, up.Addr(), 8)
	for _, bad := range []float64{-0.1, 1.5} {
		if err := p.Drop(ToUpstream, bad); err == nil {
			t.Fatalf("rate %v accepted", bad)
		}
	}
	if err := p.Delay(ToUpstream, -time.Second, 0); err == nil {
		t.Fatal("negative delay accepted")
	}
	if err := p.Drop(ToClient, 1); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c) // the echo is dropped, so the connection is cut
	eventually(t, "the counters to settle", func() bool {
		s := p.Stats()
		return s.ToClient.DropCuts == 1 && s.ToClient.Dropped == 1 && s.ToUpstream.Forwarded == 1
	})
}

func TestCutAndHeal(t *testing.T) {
	up := newServer(t, echo)
	p := newProxy(t, up.Addr(), 9)
	c1, c2 := dial(t, p.Addr()), dial(t, p.Addr())
	for i, c := range []net.Conn{c1, c2} {
		if err := ping(c, i); err != nil {
			t.Fatal(err)
		}
	}
	p.Cut()
	expectClosed(t, c1)
	expectClosed(t, c2)

	// Refused until Heal: the connect succeeds, then the proxy resets it.
	for range 3 {
		expectRefused(t, p.Addr())
	}
	s := p.Stats()
	if s.Cut != 2 || s.Refused != 3 || s.Accepted != 5 || s.Active != 0 {
		t.Fatalf("stats %+v", s)
	}

	p.Heal()
	c3 := dial(t, p.Addr())
	c3.SetDeadline(time.Now().Add(waitFor))
	if err := ping(c3, 3); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}

func TestHealRemovesEveryFault(t *testing.T) {
	up := newServer(t, echo)
	p := newProxy(t, up.Addr(), 10)
	for _, d := range []Direction{ToUpstream, ToClient} {
		if err := p.Set(d, Faults{Delay: time.Hour, Jitter: time.Minute, DropRate: 1, Blackhole: true, Stall: true}); err != nil {
			t.Fatal(err)
		}
	}
	p.Cut()
	p.Heal()
	for _, d := range []Direction{ToUpstream, ToClient} {
		if f := p.Faults(d); f != (Faults{}) {
			t.Fatalf("%v faults after heal: %+v", d, f)
		}
	}
	c := dial(t, p.Addr())
	c.SetDeadline(time.Now().Add(waitFor))
	for i := range 10 {
		if err := ping(c, i); err != nil {
			t.Fatalf("ping %d after heal: %v", i, err)
		}
	}
}

func TestSetUpstreamAppliesToNewConnections(t *testing.T) {
	a, b := newServer(t, echo), newServer(t, echo)
	p := newProxy(t, a.Addr(), 11)
	c1 := dial(t, p.Addr())
	c1.SetDeadline(time.Now().Add(waitFor))
	if err := ping(c1, 0); err != nil {
		t.Fatal(err)
	}
	p.SetUpstream(b.Addr())
	c2 := dial(t, p.Addr())
	c2.SetDeadline(time.Now().Add(waitFor))
	if err := ping(c2, 1); err != nil {
		t.Fatal(err)
	}
	if err := ping(c1, 2); err != nil { // the old connection keeps its upstream
		t.Fatal(err)
	}
	if a.received.Load() != 16 || b.received.Load() != 8 {
		t.Fatalf("upstream a got %d bytes, b %d", a.received.Load(), b.received.Load())
	}
}

func TestUnreachableUpstreamResetsClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := newProxy(t, dead, 12)
	expectRefused(t, p.Addr())
	eventually(t, "the failed dial to be counted", func() bool { return p.Stats().DialFailed == 1 })
}

// proxyGoroutines lists the stacks of goroutines running the proxy's code.
func proxyGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "netproxy.(*Proxy)") || strings.Contains(g, "netproxy.(*conn)") {
			out = append(out, g)
		}
	}
	return out
}

// noProxyGoroutines polls until no goroutine runs the proxy's code. Close
// waits for every goroutine to be done; a goroutine past its wg.Done may
// still be on its way out for a moment, hence the poll.
func noProxyGoroutines(t *testing.T, when string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		g := proxyGoroutines()
		if len(g) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy goroutines %s:\n%s", when, strings.Join(g, "\n\n"))
		}
		time.Sleep(time.Millisecond) // poll interval
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	noProxyGoroutines(t, "before the test") // earlier tests' proxies are closed
	before := runtime.NumGoroutine()
	func() {
		up := newServer(t, echo)
		defer up.Close()
		p, err := New(Config{Upstream: up.Addr(), Name: "close", Seed: 13})
		if err != nil {
			t.Fatal(err)
		}
		// Connections in every waiting state: idle, holding a delayed chunk,
		// stalled behind a full queue.
		idle := dial(t, p.Addr())
		if err := ping(idle, 0); err != nil {
			t.Fatal(err)
		}
		if err := p.Delay(ToClient, time.Hour, 0); err != nil {
			t.Fatal(err)
		}
		delayed := dial(t, p.Addr())
		delayed.Write([]byte("held for an hour"))
		eventually(t, "the echo to be held", func() bool { return up.received.Load() == 8+16 })
		p.Stall(ToUpstream)
		held := dial(t, p.Addr())
		go held.Write(make([]byte, 64<<20)) // blocks on the stall until Close resets it
		eventually(t, "the stalled queue to fill", func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			for c := range p.conns {
				if len(c.queues[idxToUpstream]) == queueLen {
					return true
				}
			}
			return false
		})
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		noProxyGoroutines(t, "after Close")
		for _, c := range []net.Conn{idle, delayed, held} {
			c.Close()
		}
	}()
	eventually(t, "the goroutine count to return to its start", func() bool {
		return runtime.NumGoroutine() <= before
	})
}
