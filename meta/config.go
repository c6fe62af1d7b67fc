package meta

// This file owns Config: the defaults, validation, and the translation of a
// Config into the URLs an embedded etcd member listens on and advertises.
// The checks of the TLS and credential fields live with their use, in
// etcdsecurity.go.
//
// Invariant: an embedded member's client URLs are https:// exactly when
// CertFile is set, and its peer URLs exactly when the peer TLS files are.

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/types"
)

// Defaults for Config fields left empty.
const (
	DefaultListenClient = "127.0.0.1:2379"
	DefaultListenPeer   = "127.0.0.1:2380"
	DefaultPrefix       = "/sluice/"
	DefaultName         = "1"
	DefaultStartTimeout = 60 * time.Second
)

// Config says where the metadata lives: an embedded etcd member (the
// default) or an existing etcd cluster (Endpoints).
type Config struct {
	// DataDir holds the embedded member's data in DataDir/etcd. Unused with Endpoints.
	DataDir string
	// Name is the embedded member's name (the broker's node id). Default "1".
	Name string
	// ListenClient is the embedded member's client host:port. Default 127.0.0.1:2379.
	ListenClient string
	// ListenPeer is the embedded member's peer host:port. Default 127.0.0.1:2380.
	ListenPeer string
	// InitialCluster is "1=http://h1:2380,2=http://h2:2380,..."; empty means a
	// single member of itself. Name must appear in it; its URL there is the
	// peer URL this member advertises.
	InitialCluster string
	// Endpoints, when non-empty, means: embed nothing, connect to this etcd cluster.
	Endpoints []string
	// MaxTxnOps is the --max-txn-ops of the etcd cluster: how many operations
	// one transaction may carry. 0 means EmbeddedMaxTxnOps for the embedded
	// member (which is started with it) and DefaultMaxTxnOps for Endpoints.
	MaxTxnOps int
	// Prefix is put before every key. Default "/sluice/"; must end in "/".
	Prefix string
	// StartTimeout bounds Open's wait for etcd to become usable, on top of
	// Open's ctx. Default 60s.
	StartTimeout time.Duration

	// Security of the etcd client connection (etcdsecurity.go). With
	// Endpoints these describe the connection to that cluster. With the
	// embedded member, CACertFile, CertFile and KeyFile come together and
	// make its client port serve mutual TLS: CertFile is the member's server
	// certificate and this process's client certificate (so it needs both
	// usages and must name the address dialled: the listen host, or
	// 127.0.0.1 for an unspecified one), and clients must present a
	// certificate from CACertFile's CAs.

	// CACertFile is a PEM bundle of the CAs that verify the etcd server
	// (and, embedded, the clients). Empty with Endpoints: the system roots.
	CACertFile string
	// CertFile and KeyFile are the PEM certificate and key this process
	// presents to etcd (etcd's client certificate authentication); embedded,
	// also the member's client-port server certificate.
	CertFile string
	KeyFile  string
	// Username and PasswordFile log in to etcd's own authentication. Open
	// reads the password from the file's first line; it is never logged.
	Username     string
	PasswordFile string

	// Peer TLS of the embedded member: all three or none. Members then
	// talk to one another over mutual TLS, and every peer URL (ListenPeer,
	// InitialCluster) is https://. The certificate serves and dials, so it
	// needs both server and client authentication usage.
	PeerCertFile      string
	PeerKeyFile       string
	PeerTrustedCAFile string
}

// withDefaults returns c with empty fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.ListenClient == "" {
		c.ListenClient = DefaultListenClient
	}
	if c.ListenPeer == "" {
		c.ListenPeer = DefaultListenPeer
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	return c
}

// Validate reports the first problem with c after defaults are applied, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	if !strings.HasSuffix(c.Prefix, "/") {
		return fmt.Errorf("%w: prefix %q must end in /", ErrInvalidConfig, c.Prefix)
	}
	if err := c.validateCredentials(); err != nil {
		return err
	}
	if len(c.Endpoints) > 0 {
		for _, ep := range c.Endpoints {
			if strings.TrimSpace(ep) == "" {
				return fmt.Errorf("%w: empty etcd endpoint", ErrInvalidConfig)
			}
		}
		return c.validateEndpointsTLS()
	}
	if err := c.validateEmbeddedTLS(); err != nil {
		return err
	}
	if c.DataDir == "" {
		return fmt.Errorf("%w: data dir is required for embedded etcd", ErrInvalidConfig)
	}
	if strings.ContainsAny(c.Name, "=,") {
		return fmt.Errorf("%w: member name %q must not contain '=' or ','", ErrInvalidConfig, c.Name)
	}
	if _, _, err := net.SplitHostPort(c.ListenClient); err != nil {
		return fmt.Errorf("%w: etcd listen client %q: %w", ErrInvalidConfig, c.ListenClient, err)
	}
	if _, _, err := net.SplitHostPort(c.ListenPeer); err != nil {
		return fmt.Errorf("%w: etcd listen peer %q: %w", ErrInvalidConfig, c.ListenPeer, err)
	}
	if _, err := c.advertisePeerURLs(); err != nil {
		return err
	}
	return nil
}

// etcdDir is where the embedded member keeps its data.
func (c Config) etcdDir() string { return filepath.Join(c.DataDir, "etcd") }

// initialCluster is InitialCluster, or a single member of c itself.
func (c Config) initialCluster() string {
	if c.InitialCluster != "" {
		return c.InitialCluster
	}
	peer := c.peerURL(c.ListenPeer)
	return c.Name + "=" + peer.String()
}

// advertisePeerURLs are the peer URLs given for c.Name in the initial cluster.
func (c Config) advertisePeerURLs() ([]url.URL, error) {
	if c.InitialCluster == "" {
		return []url.URL{c.peerURL(c.ListenPeer)}, nil
	}
	members, err := types.NewURLsMap(c.InitialCluster)
	if err != nil {
		return nil, fmt.Errorf("%w: etcd initial cluster %q: %w", ErrInvalidConfig, c.InitialCluster, err)
	}
	urls, ok := members[c.Name]
	if !ok || len(urls) == 0 {
		return nil, fmt.Errorf("%w: etcd initial cluster %q has no member named %q", ErrInvalidConfig, c.InitialCluster, c.Name)
	}
	return urls, nil
}

// advertiseClientURL is the client URL other members and clients are told
// about. An unspecified listen host (0.0.0.0, ::) is replaced by the host
// this member advertises to its peers.
func (c Config) advertiseClientURL(peer url.URL) url.URL {
	host, port, _ := net.SplitHostPort(c.ListenClient)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = peer.Hostname()
	}
	return c.clientURL(net.JoinHostPort(host, port))
}

// clientURL is hostport as a URL of the embedded member's client port.
func (c Config) clientURL(hostport string) url.URL {
	if c.clientTLSServed() {
		return url.URL{Scheme: "https", Host: hostport}
	}
	return url.URL{Scheme: "http", Host: hostport}
}

// peerURL is hostport as a URL of the embedded member's peer port.
func (c Config) peerURL(hostport string) url.URL {
	if c.peerTLS() {
		return url.URL{Scheme: "https", Host: hostport}
	}
	return url.URL{Scheme: "http", Host: hostport}
}
