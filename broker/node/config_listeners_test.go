package node

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/broker/listener"
)

// namedInterBroker is a valid --inter-broker-listener setting: CLIENT for
// clients (SASL_SSL), BROKER for the brokers (SSL, mutual TLS).
func namedInterBroker(c *Config) {
	c.Listeners = "CLIENT://127.0.0.1:9092,BROKER://127.0.0.1:9094"
	c.ListenerSecurityProtocolMap = "CLIENT:SASL_SSL,BROKER:SSL"
	c.InterBrokerListener = "BROKER"
	c.InterBrokerListen, c.InterBrokerSecurityProtocol = "", ""
	c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = "b.crt", "b.key", "ca.crt"
	c.InterBrokerPrincipals = []string{"User:broker-1"}
}

// TestInterBrokerListenerConfig: the named listener becomes the
// inter-broker one (its address, its protocol, its advertised entry) and
// leaves the client listeners; every conflicting or impossible setting is
// refused with one line naming the flags.
func TestInterBrokerListenerConfig(t *testing.T) {
	c := DefaultConfig()
	namedInterBroker(&c)
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	ls, err := c.KafkaListeners()
	if err != nil || len(ls) != 1 || ls[0].Name != "CLIENT" {
		t.Fatalf("KafkaListeners = %v, %v; want CLIENT alone", ls, err)
	}
	if got := c.InterBrokerBind(); got != "127.0.0.1:9094" {
		t.Errorf("InterBrokerBind = %q", got)
	}
	if got := c.InterBrokerProtocol(); got != InterBrokerSSL || !c.InterBrokerUsesTLS() {
		t.Errorf("InterBrokerProtocol = %q, uses TLS %v", got, c.InterBrokerUsesTLS())
	}
	if got := c.InterBrokerAdvertised(); got != "" {
		t.Errorf("InterBrokerAdvertised without an entry = %q, want \"\"", got)
	}
	c.AdvertisedListeners = "CLIENT://kafka.example:9092,BROKER://broker-1.internal:9094"
	if got := c.InterBrokerAdvertised(); got != "broker-1.internal:9094" {
		t.Errorf("InterBrokerAdvertised = %q", got)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate with an advertised entry = %v", err)
	}

	plain := DefaultConfig()
	if plain.InterBrokerBind() != plain.InterBrokerListen || plain.InterBrokerProtocol() != InterBrokerPlaintext {
		t.Errorf("without a name: bind %q protocol %q", plain.InterBrokerBind(), plain.InterBrokerProtocol())
	}

	for _, tt := range []struct {
		name   string
		change func(*Config)
		want   string // in the error; "" for valid
	}{
		{"named", func(*Config) {}, ""},
		{"name in lower case", func(c *Config) { c.InterBrokerListener = "broker" }, ""},
		{"plaintext named listener", func(c *Config) {
			c.ListenerSecurityProtocolMap = "CLIENT:SASL_SSL,BROKER:PLAINTEXT"
			c.TLSClientCAFile, c.InterBrokerPrincipals = "", nil
		}, ""},
		{"unknown name", func(c *Config) { c.InterBrokerListener = "REPLICATION" }, "--inter-broker-listener REPLICATION is not one of --listeners (CLIENT, BROKER)"},
		{"without --listeners", func(c *Config) {
			c.Listeners, c.ListenerSecurityProtocolMap = "", ""
		}, "--inter-broker-listener BROKER needs --listeners"},
		{"with --inter-broker-listen", func(c *Config) { c.InterBrokerListen = "127.0.0.1:9093" }, "--inter-broker-listen and --inter-broker-listener BROKER both"},
		{"with --inter-broker-security-protocol", func(c *Config) { c.InterBrokerSecurityProtocol = "SSL" }, "--inter-broker-security-protocol goes with --inter-broker-listen"},
		{"with --inter-broker-advertise", func(c *Config) { c.InterBrokerAdvertise = "h:1" }, "--inter-broker-advertise goes with --inter-broker-listen"},
		{"SASL listener", func(c *Config) { c.ListenerSecurityProtocolMap = "CLIENT:SASL_SSL,BROKER:SASL_SSL" }, "speaks SASL_SSL"},
		{"only listener", func(c *Config) {
			c.Listeners, c.ListenerSecurityProtocolMap = "BROKER://127.0.0.1:9094", "BROKER:SSL"
		}, "is the only one of --listeners"},
		{"SSL without client CA", func(c *Config) { c.TLSClientCAFile = "" }, "needs --tls-client-ca-file"},
		{"SSL without principals", func(c *Config) { c.InterBrokerPrincipals = nil }, "--inter-broker-principals"},
		{"same port as the client listener", func(c *Config) {
			c.Listeners = "CLIENT://127.0.0.1:9092,BROKER://127.0.0.1:9092"
		}, "both use port 9092"},
		{"same port as HTTP", func(c *Config) { c.HTTPListen = "127.0.0.1:9094" }, "each listener needs its own port"},
		{"advertised name unknown", func(c *Config) { c.AdvertisedListeners = "OTHER://h:1" }, "not a listener"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			namedInterBroker(&cfg)
			tt.change(&cfg)
			err := cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error about %q", err, tt.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("Validate = %q: more than one line", err)
			}
			if err == nil {
				ls, _ := cfg.KafkaListeners()
				if slices.ContainsFunc(ls, func(l listener.Listener) bool { return l.Addr() == cfg.InterBrokerBind() }) {
					t.Fatalf("the inter-broker listener %s is among the client listeners %v", cfg.InterBrokerBind(), ls)
				}
			}
		})
	}
}
