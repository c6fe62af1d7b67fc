package node

// This file owns the Kafka listeners' part of the configuration: which
// listeners the broker binds (Kafka's listeners, advertised.listeners and
// listener.security.protocol.map), the TLS files, and the SASL settings.
// It only parses and checks; broker/kafka binds and serves.
//
// Invariant: with Listeners empty the broker binds exactly one PLAINTEXT
// listener on KafkaListen and advertises KafkaAdvertise, as before
// listeners existed (--kafka-listen, --kafka-advertise).
// Invariant: a configuration that Validate accepts has the TLS certificate
// and key whenever a listener speaks TLS, and at least one SASL mechanism
// whenever a listener speaks SASL.
// Invariant: with InterBrokerListener set, the listener it names is the
// inter-broker listener and no client listener: KafkaListeners leaves it
// out (so it is never registered for clients nor named in Metadata), its
// address is the one InterBrokerBind gives, its protocol (PLAINTEXT or SSL,
// never SASL) the one InterBrokerProtocol gives, and none of
// InterBrokerListen, InterBrokerSecurityProtocol, InterBrokerAdvertise is
// set beside it.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/listener"
)

// ListenerConfig is the Kafka listeners and their security. The zero value
// is the legacy single PLAINTEXT listener of Config.KafkaListen.
type ListenerConfig struct {
	// Listeners is Kafka's listeners setting (--listeners), for example
	// "PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093". Empty: one
	// PLAINTEXT listener on KafkaListen.
	Listeners string
	// AdvertisedListeners is what clients are told to dial per listener
	// (--advertised-listeners); a listener without an entry advertises the
	// address it binds.
	AdvertisedListeners string
	// ListenerSecurityProtocolMap names the protocol of custom listener
	// names (--listener-security-protocol-map), "CLIENT:SASL_SSL,...".
	ListenerSecurityProtocolMap string
	// TLSCertFile and TLSKeyFile are the PEM certificate and key of the
	// TLS listeners (SSL, SASL_SSL) and of the HTTP API (HTTPS), re-read
	// when the files change.
	TLSCertFile string
	TLSKeyFile  string
	// TLSClientCAFile is the PEM CA that client certificates must chain to
	// (mutual TLS). An SSL listener then requires a client certificate and
	// its subject CN (or first SAN) is the principal User:<name>; a
	// SASL_SSL listener verifies a certificate the client gives but the
	// principal is the SASL one.
	TLSClientCAFile string
	// SASLEnabledMechanisms are the SASL mechanisms of SASL listeners, from
	// SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN.
	SASLEnabledMechanisms []string
	// AllowPlainWithoutTLS enables PLAIN (which sends the password itself)
	// on SASL_PLAINTEXT listeners too; without it PLAIN is offered on
	// SASL_SSL only.
	AllowPlainWithoutTLS bool
	// SASLSessionLifetime bounds how long a SASL authentication holds
	// before the client must re-authenticate (KIP-368); 0: the
	// connection's life.
	SASLSessionLifetime time.Duration
	// SASLScramStrictNonce refuses the SCRAM client-final nonce of
	// librdkafka before 2.6.1 (its client nonce, then the whole server
	// nonce) as Kafka 4 does (--sasl-scram-strict-nonce). False accepts
	// that one legacy form as Kafka 3.x did; the proof is still verified
	// over the bytes the client sent (see broker/auth/scram_legacy.go).
	SASLScramStrictNonce bool
	// InterBrokerListener names the listener of Listeners that the other
	// brokers use (--inter-broker-listener, Kafka's
	// inter.broker.listener.name): its address replaces InterBrokerListen,
	// its protocol InterBrokerSecurityProtocol (PLAINTEXT, or SSL with
	// mutual TLS and InterBrokerPrincipals), its --advertised-listeners
	// entry InterBrokerAdvertise. Empty: the separate InterBrokerListen.
	InterBrokerListener string
	// SASLCredentials, when set, is where SASL logins find users'
	// credentials; the broker's front end may be given one instead (its
	// options win). Tests pass an in-memory one.
	SASLCredentials auth.CredentialLookup
}

// DefaultSASLMechanisms are the mechanisms enabled when none are given.
var DefaultSASLMechanisms = []string{auth.MechanismScramSHA256, auth.MechanismScramSHA512}

// DefaultSASLSessionLifetime is --sasl-session-lifetime's default.
const DefaultSASLSessionLifetime = time.Hour

// KafkaListeners is the client Kafka listeners to bind, in order:
// Listeners parsed with the protocol map, without the one
// InterBrokerListener names, or one PLAINTEXT listener on KafkaListen when
// Listeners is empty. The first is the broker's main Kafka address
// (meta.BrokerInfo.Kafka).
func (c Config) KafkaListeners() ([]listener.Listener, error) {
	ls, err := c.AllListeners()
	if err != nil || c.InterBrokerListener == "" {
		return ls, err
	}
	ib, err := c.interBrokerNamed(ls)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ls, func(l listener.Listener) bool { return l.Name == ib.Name }), nil
}

// AllListeners is every listener of Listeners, the inter-broker one
// included (or the one of KafkaListen): what --advertised-listeners is
// read against.
func (c Config) AllListeners() ([]listener.Listener, error) {
	if c.Listeners == "" {
		l, err := listener.ParseListeners("PLAINTEXT://"+c.KafkaListen, "")
		if err != nil {
			return nil, fmt.Errorf("broker: --kafka-listen %q: %w", c.KafkaListen, err)
		}
		return l, nil
	}
	l, err := listener.ParseListeners(c.Listeners, c.ListenerSecurityProtocolMap)
	if err != nil {
		return nil, fmt.Errorf("broker: --listeners: %w", err)
	}
	return l, nil
}

// interBrokerNamed is the listener of ls that InterBrokerListener names.
func (c Config) interBrokerNamed(ls []listener.Listener) (listener.Listener, error) {
	if c.Listeners == "" {
		return listener.Listener{}, fmt.Errorf("broker: --inter-broker-listener %s needs --listeners to name it", c.InterBrokerListener)
	}
	l, ok := listener.Lookup(ls, c.InterBrokerListener)
	if !ok {
		names := make([]string, len(ls))
		for i, l := range ls {
			names[i] = l.Name
		}
		return listener.Listener{}, fmt.Errorf("broker: --inter-broker-listener %s is not one of --listeners (%s)",
			c.InterBrokerListener, strings.Join(names, ", "))
	}
	return l, nil
}

// InterBrokerBind is the address the inter-broker listener binds: the
// named listener's with InterBrokerListener, InterBrokerListen otherwise.
// It is "" for a named listener that does not exist (Validate refuses it).
func (c Config) InterBrokerBind() string {
	if c.InterBrokerListener == "" {
		return c.InterBrokerListen
	}
	ls, err := c.AllListeners()
	if err != nil {
		return ""
	}
	l, err := c.interBrokerNamed(ls)
	if err != nil {
		return ""
	}
	return l.Addr()
}

// InterBrokerProtocol is what the inter-broker listener and every dial to
// another broker's speak: the named listener's protocol with
// InterBrokerListener, InterBrokerSecurityProtocol otherwise; PLAINTEXT
// when neither says.
func (c Config) InterBrokerProtocol() string {
	if c.InterBrokerListener != "" {
		if ls, err := c.AllListeners(); err == nil {
			if l, err := c.interBrokerNamed(ls); err == nil {
				return string(l.Protocol)
			}
		}
		return ""
	}
	if c.InterBrokerSecurityProtocol == "" {
		return InterBrokerPlaintext
	}
	return c.InterBrokerSecurityProtocol
}

// InterBrokerAdvertised is the inter-broker address given to the other
// brokers as configured: InterBrokerAdvertise, or with InterBrokerListener
// the named listener's --advertised-listeners entry; "" when none is
// given, and the caller derives it from the bound address.
func (c Config) InterBrokerAdvertised() string {
	if c.InterBrokerListener == "" {
		return c.InterBrokerAdvertise
	}
	ls, err := c.AllListeners()
	if err != nil {
		return ""
	}
	l, err := c.interBrokerNamed(ls)
	if err != nil {
		return ""
	}
	adv, err := listener.ParseAdvertised(c.AdvertisedListeners, ls)
	if err != nil {
		return ""
	}
	if a, ok := listener.Lookup(adv, l.Name); ok && a.Addr() != l.Addr() {
		return a.Addr()
	}
	return ""
}

// validateInterBrokerListener checks InterBrokerListener against the
// listeners and the separate inter-broker settings it replaces.
func (c Config) validateInterBrokerListener(ls []listener.Listener) error {
	if c.InterBrokerListener == "" {
		return nil
	}
	name := c.InterBrokerListener
	switch {
	case c.InterBrokerListen != "":
		return fmt.Errorf("broker: --inter-broker-listen and --inter-broker-listener %s both name the inter-broker listener; give one", name)
	case c.InterBrokerSecurityProtocol != "":
		return fmt.Errorf("broker: --inter-broker-security-protocol goes with --inter-broker-listen; with --inter-broker-listener %s the listener's protocol is the inter-broker one", name)
	case c.InterBrokerAdvertise != "":
		return fmt.Errorf("broker: --inter-broker-advertise goes with --inter-broker-listen; with --inter-broker-listener %s advertise it in --advertised-listeners", name)
	}
	l, err := c.interBrokerNamed(ls)
	if err != nil {
		return err
	}
	if l.Protocol.SASL() {
		return fmt.Errorf("broker: --inter-broker-listener %s speaks %s: brokers authenticate each other with mutual TLS, not SASL; map it to SSL (or PLAINTEXT)", name, l.Protocol)
	}
	if len(ls) == 1 {
		return fmt.Errorf("broker: --inter-broker-listener %s is the only one of --listeners; clients need one of their own", name)
	}
	return nil
}

// validateListeners checks the listeners, their advertised addresses and
// their security settings, and returns the listeners' bind addresses by a
// name for distinctListeners.
func (c Config) validateListeners() (map[string]string, error) {
	ls, err := c.AllListeners()
	if err != nil {
		return nil, err
	}
	if err := c.validateInterBrokerListener(ls); err != nil {
		return nil, err
	}
	binds := make(map[string]string, len(ls))
	if c.Listeners == "" {
		binds["kafka-listen"] = c.KafkaListen
		if c.AdvertisedListeners != "" || c.ListenerSecurityProtocolMap != "" {
			return nil, errors.New("broker: --advertised-listeners and --listener-security-protocol-map need --listeners")
		}
	} else {
		for _, l := range ls {
			binds["listeners "+l.Name] = l.Addr()
		}
		if c.KafkaAdvertise != "" && c.KafkaAdvertise != c.KafkaListen {
			return nil, errors.New("broker: --kafka-advertise goes with --kafka-listen; with --listeners use --advertised-listeners")
		}
		if _, err := listener.ParseAdvertised(c.AdvertisedListeners, ls); err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
	}
	var anyTLS, anySASL bool
	for _, l := range ls {
		anyTLS = anyTLS || l.Protocol.TLS()
		anySASL = anySASL || l.Protocol.SASL()
	}
	if anyTLS && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		return nil, errors.New("broker: a TLS listener (SSL, SASL_SSL) needs --tls-cert-file and --tls-key-file")
	}
	if c.TLSClientCAFile != "" && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		return nil, errors.New("broker: --tls-client-ca-file needs --tls-cert-file and --tls-key-file")
	}
	if c.SASLSessionLifetime < 0 {
		return nil, fmt.Errorf("broker: --sasl-session-lifetime %v must not be negative (0: no limit)", c.SASLSessionLifetime)
	}
	for i, m := range c.SASLEnabledMechanisms {
		switch m {
		case auth.MechanismScramSHA256, auth.MechanismScramSHA512, auth.MechanismPlain:
		default:
			return nil, fmt.Errorf("broker: --sasl-enabled-mechanisms: unknown mechanism %q (want SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN)", m)
		}
		if slices.Contains(c.SASLEnabledMechanisms[:i], m) {
			return nil, fmt.Errorf("broker: --sasl-enabled-mechanisms: %s listed twice", m)
		}
	}
	if anySASL && len(c.SASLEnabledMechanisms) == 0 {
		return nil, errors.New("broker: a SASL listener needs --sasl-enabled-mechanisms")
	}
	return binds, nil
}
