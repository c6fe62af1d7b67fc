package node

import (
	"strings"
	"testing"
	"time"
)

// TestConfigValidateLimits: the request, fetch and connection bounds reject
// values that cannot work, naming the setting.
func TestConfigValidateLimits(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*Config)
		want   string // in the error; "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no per-IP limit", func(c *Config) { c.MaxConnectionsPerIP = 0 }, ""},
		{"request memory below one chunk", func(c *Config) { c.QueuedMaxRequestBytes = 1 << 10 }, "queued max request bytes"},
		{"request memory below max request", func(c *Config) { c.QueuedMaxRequestBytes = 1 << 20 }, ""}, // larger frames are refused
		{"fetch max bytes zero", func(c *Config) { c.FetchMaxBytes = 0 }, "fetch max bytes"},
		{"fetch max bytes negative", func(c *Config) { c.FetchMaxBytes = -1 }, "fetch max bytes"},
		{"no connections", func(c *Config) { c.MaxConnections = 0 }, "max connections"},
		{"negative per-IP", func(c *Config) { c.MaxConnectionsPerIP = -1 }, "max connections per ip"},
		{"zero idle", func(c *Config) { c.ConnectionsMaxIdle = 0 }, "connections max idle"},
		{"negative idle", func(c *Config) { c.ConnectionsMaxIdle = -time.Second }, "connections max idle"},
		{"min receive rate off", func(c *Config) { c.MinReceiveRate, c.MinReceiveWindow = 0, 0 }, ""},
		{"negative min receive rate", func(c *Config) { c.MinReceiveRate = -1 }, "min receive rate"},
		{"min receive rate without a window", func(c *Config) { c.MinReceiveWindow = 0 }, "min receive rate"},
		{"inter-broker on the kafka port", func(c *Config) { c.InterBrokerListen = c.KafkaListen }, "each listener needs its own port"},
		{"inter-broker on the http port", func(c *Config) { c.InterBrokerListen = c.HTTPListen }, "each listener needs its own port"},
		{"inter-broker without port", func(c *Config) { c.InterBrokerListen = "127.0.0.1" }, "inter-broker-listen"},
		{"inter-broker advertise without port", func(c *Config) { c.InterBrokerAdvertise = "h" }, "inter-broker-advertise"},
		{"super user not a principal", func(c *Config) { c.SuperUsers = []string{"alice"} }, "--super-users"},
		{"super user wildcard", func(c *Config) { c.SuperUsers = []string{"User:*"} }, "--super-users"},
		{"super users", func(c *Config) { c.SuperUsers = []string{"User:alice", "User:bob"} }, ""},
		{"tls cert without key", func(c *Config) { c.TLSCertFile = "c.pem" }, "go together"},
		{"tls client ca without cert", func(c *Config) { c.TLSClientCAFile = "ca.pem" }, "--tls-client-ca-file"},
		{"inter-broker protocol unknown", func(c *Config) { c.InterBrokerSecurityProtocol = "SASL_SSL" }, "--inter-broker-security-protocol"},
		{"inter-broker plaintext spelled empty", func(c *Config) { c.InterBrokerSecurityProtocol = "" }, ""},
		{"inter-broker SSL without files", func(c *Config) { c.InterBrokerSecurityProtocol = "SSL" }, "needs --tls-cert-file"},
		{"inter-broker SSL without CA", func(c *Config) { interBrokerSSL(c); c.TLSClientCAFile = "" }, "needs --tls-client-ca-file"},
		{"inter-broker SSL without principals", func(c *Config) { interBrokerSSL(c); c.InterBrokerPrincipals = nil }, "--inter-broker-principals"},
		{"inter-broker SSL with super users", func(c *Config) {
			interBrokerSSL(c)
			c.InterBrokerPrincipals, c.SuperUsers = nil, []string{"User:broker"}
		}, ""},
		{"inter-broker principal not a principal", func(c *Config) { interBrokerSSL(c); c.InterBrokerPrincipals = []string{"broker-1"} }, "--inter-broker-principals"},
		{"inter-broker SSL", interBrokerSSL, ""},
		{"all on free ports", func(c *Config) {
			c.KafkaListen, c.HTTPListen, c.InterBrokerListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
		}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error about %q", err, tt.want)
			}
		})
	}
}

// interBrokerSSL is a valid inter-broker SSL setting (Validate does not
// read the files).
func interBrokerSSL(c *Config) {
	c.InterBrokerSecurityProtocol = InterBrokerSSL
	c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = "b.crt", "b.key", "ca.crt"
	c.InterBrokerPrincipals = []string{"User:broker-1", "User:broker-2"}
}

// TestInterBrokerPeerAllowed: the listener serves the named principals, or
// the super users when none are named.
func TestInterBrokerPeerAllowed(t *testing.T) {
	c := DefaultConfig()
	c.SuperUsers = []string{"User:admin"}
	if !c.InterBrokerPeerAllowed("User:admin") || c.InterBrokerPeerAllowed("User:alice") {
		t.Fatal("without --inter-broker-principals the super users, and only they, are allowed")
	}
	c.InterBrokerPrincipals = []string{"User:broker-1"}
	if !c.InterBrokerPeerAllowed("User:broker-1") || c.InterBrokerPeerAllowed("User:admin") {
		t.Fatal("--inter-broker-principals replaces the super users")
	}
}
