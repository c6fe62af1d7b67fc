package netproxy

// This file owns the Mesh: one Proxy per (source, endpoint) pair of a
// cluster, and partitions expressed over node names. The set of links and
// their proxies is fixed by NewMesh; Mesh.mu guards only the upstream
// addresses of self links, which SetUpstream changes.
//
// Invariant: a link never joins a node to itself; a source reaches its own
// node's endpoints directly, since a node cannot be partitioned from itself.

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// Endpoint is one listener of a cluster, for example broker 2's replication
// endpoint or etcd member 3's peer port.
type Endpoint struct {
	// Name identifies the endpoint in the mesh, for example "b2-inter".
	Name string
	// Node is the machine the endpoint belongs to, which partitions name, for
	// example "b2"; empty means Name.
	Node string
	// Addr is the endpoint's real address.
	Addr string
}

func (e Endpoint) node() string {
	if e.Node == "" {
		return e.Name
	}
	return e.Node
}

// MeshConfig configures a Mesh.
type MeshConfig struct {
	// Endpoints are the listeners to put proxies in front of.
	Endpoints []Endpoint
	// Sources are the nodes that dial endpoints (brokers, and "client" for
	// the workload); each gets its own proxy to every endpoint of another
	// node.
	Sources []string
	// ListenHost is the host the proxies listen on; default 127.0.0.1.
	ListenHost string
	// Seed seeds every proxy (each mixes in its link's name).
	Seed uint64
	// Logger is passed to every proxy; the zero value is a no-op.
	Logger zerolog.Logger
}

// Validate reports a configuration NewMesh cannot use.
func (c MeshConfig) Validate() error {
	names := make(map[string]bool)
	for _, e := range c.Endpoints {
		if e.Name == "" || e.Addr == "" {
			return fmt.Errorf("netproxy: endpoint %q without a name or an address", e.Name)
		}
		if names[e.Name] {
			return fmt.Errorf("netproxy: endpoint %q twice", e.Name)
		}
		names[e.Name] = true
	}
	seen := make(map[string]bool)
	for _, s := range c.Sources {
		if s == "" || seen[s] {
			return fmt.Errorf("netproxy: source %q empty or twice", s)
		}
		seen[s] = true
	}
	return nil
}

// Link is one proxied path: a source node dialing an endpoint.
type Link struct {
	Source, Endpoint string
}

func (l Link) String() string { return l.Source + "->" + l.Endpoint }

// Mesh is a set of proxies, one per link, with partitions over node names.
type Mesh struct {
	proxies map[Link]*Proxy   // immutable after NewMesh
	nodes   map[string]bool   // sources and endpoint nodes; immutable
	nodeOf  map[string]string // endpoint name → its node; immutable

	mu        sync.Mutex
	endpoints map[string]Endpoint // guarded by mu: by name, with the current Addr
}

// NewMesh starts one proxy per pair of a source and an endpoint of another
// node.
func NewMesh(cfg MeshConfig) (*Mesh, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host := cfg.ListenHost
	if host == "" {
		host = "127.0.0.1"
	}
	m := &Mesh{
		endpoints: make(map[string]Endpoint),
		proxies:   make(map[Link]*Proxy),
		nodes:     make(map[string]bool),
		nodeOf:    make(map[string]string),
	}
	for _, s := range cfg.Sources {
		m.nodes[s] = true
	}
	for _, e := range cfg.Endpoints {
		m.endpoints[e.Name] = e
		m.nodes[e.node()] = true
		m.nodeOf[e.Name] = e.node()
	}
	for _, s := range cfg.Sources {
		for _, e := range cfg.Endpoints {
			if e.node() == s {
				continue
			}
			l := Link{Source: s, Endpoint: e.Name}
			p, err := New(Config{
				Listen:   net.JoinHostPort(host, "0"),
				Upstream: e.Addr,
				Name:     l.String(),
				Seed:     cfg.Seed ^ linkHash(l),
				Logger:   cfg.Logger,
			})
			if err != nil {
				return nil, errors.Join(fmt.Errorf("netproxy: mesh link %s: %w", l, err), m.Close())
			}
			m.proxies[l] = p
		}
	}
	return m, nil
}

func linkHash(l Link) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(l.Source + "\x00" + l.Endpoint)) // hash writes never fail
	return h.Sum64()
}

// Addr is the address source should dial to reach endpoint: its proxy's, or
// the endpoint's own when it is on the source's node.
func (m *Mesh) Addr(source, endpoint string) (string, error) {
	if p := m.proxies[Link{source, endpoint}]; p != nil {
		return p.Addr(), nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.endpoints[endpoint]
	if !ok {
		return "", fmt.Errorf("netproxy: unknown endpoint %q", endpoint)
	}
	if e.node() != source {
		return "", fmt.Errorf("netproxy: unknown source %q", source)
	}
	return e.Addr, nil
}

// Proxy returns the proxy of a link, or nil when there is none (a self link
// or an unknown name), for faults finer than partitions.
func (m *Mesh) Proxy(source, endpoint string) *Proxy {
	return m.proxies[Link{source, endpoint}]
}

// Links returns every link, sorted.
func (m *Mesh) Links() []Link {
	out := make([]Link, 0, len(m.proxies))
	for l := range m.proxies {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Link) int {
		return cmp.Or(strings.Compare(a.Source, b.Source), strings.Compare(a.Endpoint, b.Endpoint))
	})
	return out
}

// SetUpstream points the endpoint at addr (a restarted process on a new
// port) for connections made from now on.
func (m *Mesh) SetUpstream(endpoint, addr string) error {
	m.mu.Lock()
	e, ok := m.endpoints[endpoint]
	if ok {
		e.Addr = addr
		m.endpoints[endpoint] = e
	}
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("netproxy: unknown endpoint %q", endpoint)
	}
	for l, p := range m.proxies {
		if l.Endpoint == endpoint {
			p.SetUpstream(addr)
		}
	}
	return nil
}

// Partition blackholes both directions of every link between a node of a and
// a node of b, whichever side dials.
func (m *Mesh) Partition(a, b []string) error {
	if err := m.known(a, b); err != nil {
		return err
	}
	m.each(func(src, dst string, p *Proxy) {
		if (slices.Contains(a, src) && slices.Contains(b, dst)) ||
			(slices.Contains(b, src) && slices.Contains(a, dst)) {
			p.Blackhole(BothWays)
		}
	})
	return nil
}

// PartitionOneWay loses everything the nodes of from send to the nodes of
// to, on links either side dialed, while the other way still flows.
func (m *Mesh) PartitionOneWay(from, to []string) error {
	if err := m.known(from, to); err != nil {
		return err
	}
	m.each(func(src, dst string, p *Proxy) {
		if slices.Contains(from, src) && slices.Contains(to, dst) {
			p.Blackhole(ToUpstream)
		}
		if slices.Contains(to, src) && slices.Contains(from, dst) {
			p.Blackhole(ToClient)
		}
	})
	return nil
}

// Isolate blackholes both directions of every link to or from node.
func (m *Mesh) Isolate(node string) error {
	if err := m.known([]string{node}); err != nil {
		return err
	}
	m.each(func(src, dst string, p *Proxy) {
		if src == node || dst == node {
			p.Blackhole(BothWays)
		}
	})
	return nil
}

// HealAll heals every proxy (see Proxy.Heal).
func (m *Mesh) HealAll() {
	for _, p := range m.proxies {
		p.Heal()
	}
}

// Stats returns every link's counters.
func (m *Mesh) Stats() map[Link]Stats {
	out := make(map[Link]Stats, len(m.proxies))
	for l, p := range m.proxies {
		out[l] = p.Stats()
	}
	return out
}

// Close closes every proxy.
func (m *Mesh) Close() error {
	var errs []error
	for _, p := range m.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// each calls f for every link with its source node and endpoint node.
func (m *Mesh) each(f func(src, dst string, p *Proxy)) {
	for l, p := range m.proxies {
		f(l.Source, m.nodeOf[l.Endpoint], p)
	}
}

// known reports a node name the mesh does not have: a typo in a schedule
// would otherwise partition nothing, silently.
func (m *Mesh) known(groups ...[]string) error {
	for _, g := range groups {
		for _, n := range g {
			if !m.nodes[n] {
				return fmt.Errorf("netproxy: unknown node %q", n)
			}
		}
	}
	return nil
}
