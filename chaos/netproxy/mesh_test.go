package netproxy

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"
)

// Outcomes of a probe of one link.
const (
	delivered      = "delivered"
	lostToUpstream = "lost on the way to the endpoint"
	lostToClient   = "lost on the way back"
)

// probe sends a message from source to endpoint on a new connection and
// reports whether its echo came back or, from the link's counters, where it
// was lost. It waits for an event either way, never for a fixed time.
func probe(t *testing.T, m *Mesh, source, endpoint string) string {
	t.Helper()
	addr, err := m.Addr(source, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := m.Proxy(source, endpoint)
	var before Stats
	if p != nil {
		before = p.Stats()
	}
	c := dial(t, addr)
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatalf("%s->%s: write: %v", source, endpoint, err)
	}
	deadline := time.Now().Add(waitFor)
	var buf [4]byte
	got := 0
	for {
		c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		n, err := c.Read(buf[got:])
		got += n
		if got == len(buf) {
			return delivered
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s->%s: read: %v", source, endpoint, err)
		}
		if p != nil {
			s := p.Stats()
			if s.ToUpstream.Dropped > before.ToUpstream.Dropped {
				return lostToUpstream
			}
			if s.ToClient.Dropped > before.ToClient.Dropped {
				return lostToClient
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s->%s: neither delivered nor lost", source, endpoint)
		}
	}
}

type fakeCluster struct {
	mesh    *Mesh
	servers map[string]*server // by node
}

func newFakeCluster(t *testing.T) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{servers: make(map[string]*server)}
	var eps []Endpoint
	for _, n := range []string{"n1", "n2", "n3"} {
		s := newServer(t, echo)
		fc.servers[n] = s
		eps = append(eps, Endpoint{Name: n + "-echo", Node: n, Addr: s.Addr()})
	}
	m, err := NewMesh(MeshConfig{Endpoints: eps, Sources: []string{"n1", "n2", "n3", "client"}, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close mesh: %v", err)
		}
	})
	fc.mesh = m
	return fc
}

func nodeOf(endpoint string) string { return endpoint[:len(endpoint)-len("-echo")] }

func TestMeshLinks(t *testing.T) {
	fc := newFakeCluster(t)
	m := fc.mesh
	if got := len(m.Links()); got != 9 { // 4 sources × 3 endpoints − 3 self links
		t.Fatalf("%d links, want 9: %v", got, m.Links())
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		addr, err := m.Addr(n, n+"-echo")
		if err != nil || addr != fc.servers[n].Addr() {
			t.Fatalf("self link %s: %q, %v; want the endpoint's own address", n, addr, err)
		}
	}
	addrs := make(map[string]bool)
	for _, l := range m.Links() {
		addr, err := m.Addr(l.Source, l.Endpoint)
		if err != nil || addrs[addr] {
			t.Fatalf("link %s: address %q (%v) missing or shared", l, addr, err)
		}
		addrs[addr] = true
		if got := probe(t, m, l.Source, l.Endpoint); got != delivered {
			t.Fatalf("healthy link %s: %s", l, got)
		}
	}
	if _, err := m.Addr("n4", "n1-echo"); err == nil {
		t.Fatal("unknown source has an address")
	}
	if err := m.Partition([]string{"n1"}, []string{"n9"}); err == nil {
		t.Fatal("partition with an unknown node accepted")
	}
}

func TestMeshPartitions(t *testing.T) {
	in := func(n string, group ...string) bool { return slices.Contains(group, n) }
	cases := []struct {
		name  string
		apply func(m *Mesh) error
		want  func(src, dst string) string // dst is the endpoint's node
	}{
		{
			name:  "partition n1 from n2 and n3",
			apply: func(m *Mesh) error { return m.Partition([]string{"n1"}, []string{"n2", "n3"}) },
			want: func(src, dst string) string {
				if (src == "n1" && in(dst, "n2", "n3")) || (in(src, "n2", "n3") && dst == "n1") {
					return lostToUpstream
				}
				return delivered
			},
		},
		{
			name:  "one way from n1 to n2",
			apply: func(m *Mesh) error { return m.PartitionOneWay([]string{"n1"}, []string{"n2"}) },
			want: func(src, dst string) string {
				switch {
				case src == "n1" && dst == "n2":
					return lostToUpstream // n1's request never reaches n2
				case src == "n2" && dst == "n1":
					return lostToClient // n2's request reaches n1, n1's reply does not
				}
				return delivered
			},
		},
		{
			name:  "isolate n3",
			apply: func(m *Mesh) error { return m.Isolate("n3") },
			want: func(src, dst string) string {
				if src == "n3" || dst == "n3" {
					return lostToUpstream
				}
				return delivered
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeCluster(t)
			m := fc.mesh
			if err := tc.apply(m); err != nil {
				t.Fatal(err)
			}
			for _, l := range m.Links() {
				dst := nodeOf(l.Endpoint)
				received := fc.servers[dst].received.Load()
				got := probe(t, m, l.Source, l.Endpoint)
				if want := tc.want(l.Source, dst); got != want {
					t.Fatalf("link %s: %s, want %s", l, got, want)
				}
				if got == lostToClient {
					// The endpoint did receive the request.
					eventually(t, "the endpoint to count the request", func() bool {
						return fc.servers[dst].received.Load() == received+4
					})
				}
				if got == lostToUpstream && fc.servers[dst].received.Load() != received {
					t.Fatalf("link %s: the endpoint received a lost request", l)
				}
			}
			m.HealAll()
			for _, l := range m.Links() {
				if got := probe(t, m, l.Source, l.Endpoint); got != delivered {
					t.Fatalf("after heal, link %s: %s", l, got)
				}
			}
		})
	}
}

func TestMeshSetUpstream(t *testing.T) {
	fc := newFakeCluster(t)
	m := fc.mesh
	moved := newServer(t, echo) // n2 restarted on a new port
	if err := m.SetUpstream("n2-echo", moved.Addr()); err != nil {
		t.Fatal(err)
	}
	if got := probe(t, m, "n1", "n2-echo"); got != delivered {
		t.Fatalf("n1->n2-echo: %s", got)
	}
	if got := probe(t, m, "client", "n2-echo"); got != delivered {
		t.Fatalf("client->n2-echo: %s", got)
	}
	if moved.received.Load() != 8 || fc.servers["n2"].received.Load() != 0 {
		t.Fatalf("moved endpoint got %d bytes, old %d", moved.received.Load(), fc.servers["n2"].received.Load())
	}
	if addr, err := m.Addr("n2", "n2-echo"); err != nil || addr != moved.Addr() {
		t.Fatalf("self link after move: %q, %v", addr, err)
	}
	if err := m.SetUpstream("n9-echo", moved.Addr()); err == nil {
		t.Fatal("unknown endpoint accepted")
	}
}
