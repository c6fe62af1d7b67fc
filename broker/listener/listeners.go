package listener

// This file owns the parsing of Kafka's listener settings: `listeners`,
// `listener.security.protocol.map` and `advertised.listeners`. It is pure:
// no I/O, no clock, no state outlives a call.
//
// Invariant: a parsed listener's Name is upper case and its Protocol is one
// of the four protocols; no two listeners share a name, and no two share a
// port other than 0 (0 asks the system for a free port).
// Invariant: ParseAdvertised answers one entry per listener, in the
// listeners' order, with the listener's name and protocol; none advertises
// an empty or unspecified (0.0.0.0, ::) host.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Protocol is a listener's security protocol, Kafka's security.protocol.
type Protocol string

// The four security protocols.
const (
	Plaintext     Protocol = "PLAINTEXT"
	SSL           Protocol = "SSL"
	SASLPlaintext Protocol = "SASL_PLAINTEXT"
	SASLSSL       Protocol = "SASL_SSL"
)

// protocols lists the protocols in the order error messages name them.
var protocols = [...]Protocol{Plaintext, SSL, SASLPlaintext, SASLSSL}

// TLS reports whether connections to the listener are encrypted with TLS.
func (p Protocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether clients authenticate with SASL on the listener.
func (p Protocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// ParseProtocol reads a security protocol name, in any case.
func ParseProtocol(s string) (Protocol, error) {
	up := Protocol(strings.ToUpper(strings.TrimSpace(s)))
	for _, p := range protocols {
		if up == p {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown security protocol %q (want one of %s)", s, protocolNames())
}

func protocolNames() string {
	names := make([]string, len(protocols))
	for i, p := range protocols {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// Listener is one endpoint: where it binds (Host, Port) or, from
// ParseAdvertised, what clients are told.
type Listener struct {
	// Name is upper case: the protocol's own name, or a custom name given a
	// protocol by listener.security.protocol.map.
	Name     string
	Protocol Protocol
	// Host is a host name or an IP address (IPv6 without brackets); empty
	// means every interface.
	Host string
	// Port is 0 to 65535; 0 binds a free port chosen by the system.
	Port int
}

// Addr is the host:port to bind (net.Listen) or dial.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// String is the listener in Kafka's form, NAME://host:port; parsing it again
// (with the same protocol map) gives the same listener.
func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// Lookup finds the listener named name (in any case).
func Lookup(listeners []Listener, name string) (Listener, bool) {
	name = strings.ToUpper(strings.TrimSpace(name))
	for _, l := range listeners {
		if l.Name == name {
			return l, true
		}
	}
	return Listener{}, false
}

// ParseProtocolMap reads Kafka's listener.security.protocol.map, a list of
// NAME:PROTOCOL separated by commas, for example
// "CLIENT:SASL_SSL,REPLICATION:SSL". Names are upper-cased. An empty map is
// valid: every listener is then named after its protocol.
func ParseProtocolMap(s string) (map[string]Protocol, error) {
	m := make(map[string]Protocol)
	for _, item := range splitList(s) {
		name, proto, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("listener security protocol map: %q: want NAME:PROTOCOL", item)
		}
		name, err := parseName(name)
		if err != nil {
			return nil, fmt.Errorf("listener security protocol map: %q: %w", item, err)
		}
		p, err := ParseProtocol(proto)
		if err != nil {
			return nil, fmt.Errorf("listener security protocol map: %q: %w", item, err)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener security protocol map: %s is mapped twice", name)
		}
		m[name] = p
	}
	return m, nil
}

// ParseListeners reads Kafka's listeners setting, a list of NAME://host:port
// separated by commas, for example
// "PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093". A listener's
// protocol is the one protocolMap (listener.security.protocol.map, see
// ParseProtocolMap) gives its name, else the protocol of that name. An IPv6
// host is written in brackets ("[::1]:9092"); an empty host ("://:9092")
// binds every interface. Empty items (a trailing comma) are skipped, as
// Kafka does. The listeners come back in the order given.
func ParseListeners(spec string, protocolMap string) ([]Listener, error) {
	pm, err := ParseProtocolMap(protocolMap)
	if err != nil {
		return nil, err
	}
	items := splitList(spec)
	if len(items) == 0 {
		return nil, errors.New("listeners: none given (want NAME://host:port, ...)")
	}
	var (
		out    = make([]Listener, 0, len(items))
		byPort = make(map[int]string)
	)
	for _, item := range items {
		l, err := parseEndpoint(item)
		if err != nil {
			return nil, fmt.Errorf("listeners: %q: %w", item, err)
		}
		if p, ok := pm[l.Name]; ok {
			l.Protocol = p
		} else if l.Protocol, err = ParseProtocol(l.Name); err != nil {
			return nil, fmt.Errorf("listeners: %q: listener name %s is not a security protocol (%s) and the listener security protocol map does not name it",
				item, l.Name, protocolNames())
		}
		if _, dup := Lookup(out, l.Name); dup {
			return nil, fmt.Errorf("listeners: listener name %s appears twice", l.Name)
		}
		if other, dup := byPort[l.Port]; dup && l.Port != 0 {
			return nil, fmt.Errorf("listeners: %s and %s both use port %d", other, l.Name, l.Port)
		}
		byPort[l.Port] = l.Name
		out = append(out, l)
	}
	return out, nil
}

// ParseAdvertised reads Kafka's advertised.listeners, NAME://host:port
// separated by commas, against the listeners from ParseListeners: what the
// broker tells clients to dial for each listener. Every advertised name must
// be a listener's, at most once. A listener without an entry advertises the
// address it binds, so that address must name a host (not empty, not 0.0.0.0
// or ::): give such a listener an entry. A listener bound to port 0 and
// without an entry is answered with port 0, which the caller replaces with
// the port it bound (or calls ParseAdvertised with the bound listeners).
// The answer has one entry per listener, in the listeners' order, with the
// listener's name and protocol; two entries may share a port (clients may
// reach the brokers through different hosts).
func ParseAdvertised(spec string, listeners []Listener) ([]Listener, error) {
	given := make(map[string]Listener)
	for _, item := range splitList(spec) {
		a, err := parseEndpoint(item)
		if err != nil {
			return nil, fmt.Errorf("advertised listeners: %q: %w", item, err)
		}
		if _, ok := Lookup(listeners, a.Name); !ok {
			return nil, fmt.Errorf("advertised listeners: %q: %s is not a listener (listeners: %s)", item, a.Name, names(listeners))
		}
		if _, dup := given[a.Name]; dup {
			return nil, fmt.Errorf("advertised listeners: %s is advertised twice", a.Name)
		}
		if why := unroutable(a.Host); why != "" {
			return nil, fmt.Errorf("advertised listeners: %q: %s is not an address clients can dial", item, why)
		}
		if a.Port == 0 {
			return nil, fmt.Errorf("advertised listeners: %q: port 0 cannot be dialled", item)
		}
		given[a.Name] = a
	}
	out := make([]Listener, len(listeners))
	for i, l := range listeners {
		a, ok := given[l.Name]
		if !ok {
			if why := unroutable(l.Host); why != "" {
				return nil, fmt.Errorf("advertised listeners: listener %s binds %s and %s is not an address clients can dial; advertise one as %s://host:port",
					l.Name, l.Addr(), why, l.Name)
			}
			out[i] = l
			continue
		}
		out[i] = Listener{Name: l.Name, Protocol: l.Protocol, Host: a.Host, Port: a.Port}
	}
	return out, nil
}

// unroutable says why clients cannot be told to dial host ("an empty
// host", "0.0.0.0"), or "" when they can.
func unroutable(host string) string {
	if host == "" {
		return "an empty host"
	}
	if a, err := netip.ParseAddr(host); err == nil && a.IsUnspecified() {
		return host
	}
	return ""
}

func names(listeners []Listener) string {
	n := make([]string, len(listeners))
	for i, l := range listeners {
		n[i] = l.Name
	}
	return strings.Join(n, ", ")
}

// splitList splits a comma-separated setting, trimming spaces and dropping
// empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parseName checks and upper-cases a listener name. Names become parts of
// setting keys (listener.name.<name>.…), so only letters, digits, '_' and
// '-' are allowed.
func parseName(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("empty listener name")
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' && r != '-' {
			return "", fmt.Errorf("listener name %q may hold only letters, digits, '_' and '-'", s)
		}
	}
	return strings.ToUpper(s), nil
}

// parseEndpoint reads NAME://host:port. The protocol is left for the caller.
func parseEndpoint(item string) (Listener, error) {
	rawName, rest, ok := strings.Cut(item, "://")
	if !ok {
		return Listener{}, errors.New("want NAME://host:port")
	}
	name, err := parseName(rawName)
	if err != nil {
		return Listener{}, err
	}
	host, portStr, err := splitHostPort(rest)
	if err != nil {
		return Listener{}, err
	}
	port, err := parsePort(portStr)
	if err != nil {
		return Listener{}, err
	}
	return Listener{Name: name, Host: host, Port: port}, nil
}

// splitHostPort splits host:port or [ipv6]:port, checking the host.
func splitHostPort(s string) (host, port string, err error) {
	if s == "" {
		return "", "", errors.New("missing host:port after ://")
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", errors.New("'[' without ']' around the IPv6 address")
		}
		host = s[1:end]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || !hostChars(host, ":%") {
			return "", "", fmt.Errorf("%q in brackets is not an IPv6 address", host)
		}
		after := s[end+1:]
		if after == "" || after == ":" {
			return "", "", errors.New("missing port")
		}
		if after[0] != ':' {
			return "", "", fmt.Errorf("want ':' and the port after ']', got %q", after)
		}
		return host, after[1:], nil
	}
	colon := strings.LastIndexByte(s, ':')
	if colon < 0 {
		return "", "", errors.New("missing port")
	}
	host, port = s[:colon], s[colon+1:]
	if strings.Contains(host, ":") {
		return "", "", errors.New("an IPv6 address must be in brackets, as [::1]:9092")
	}
	if !hostChars(host, "") {
		return "", "", fmt.Errorf("host %q may hold only letters, digits, '-', '.' and '_'", host)
	}
	if port == "" {
		return "", "", errors.New("missing port")
	}
	return host, port, nil
}

// hostChars reports whether s holds only letters, digits, '-', '.', '_' and
// the bytes of extra (':' and '%' inside brackets, for IPv6 and its zone).
func hostChars(s, extra string) bool {
	for _, r := range s {
		ok := r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' ||
			r == '-' || r == '.' || r == '_' || strings.ContainsRune(extra, r)
		if !ok {
			return false
		}
	}
	return true
}

func parsePort(s string) (int, error) {
	if len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("port %q is not a number from 0 to 65535", s)
	}
	p, err := strconv.Atoi(s)
	if err != nil || p > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 0 to 65535", s)
	}
	return p, nil
}
