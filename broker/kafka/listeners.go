package kafka

// This file owns the client Kafka listeners (--listeners, or the one
// PLAINTEXT listener of --kafka-listen): binding each, the address each
// advertises, the TLS configuration of the TLS ones and the SASL settings
// of the SASL ones.
//
// Invariant: every listener of node.Config.KafkaListeners is bound before
// the broker registers, and Listeners (the advertised addresses by name)
// names each one exactly once, with a dialable host and port.
// Invariant: a TLS listener serves the certificate of its TLSSource, which
// re-reads the files when they change; connections made later get the new
// certificate without a restart.
//
// The listeners are fixed once Listen returns; they are read without locks.

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/listener"
)

// kafkaListener is one bound client listener.
type kafkaListener struct {
	listener.Listener        // name, protocol and bind address as configured
	advertise         string // host:port clients are told to dial
	ln                net.Listener
	tls               *listener.TLSSource // nil unless Protocol.TLS()
	sasl              *auth.SessionConfig // nil unless Protocol.SASL()
}

// listenClients binds every client listener and settles what each
// advertises. On an error nothing stays bound.
func (b *Server) listenClients() (err error) {
	ls, err := b.Cfg.KafkaListeners()
	if err != nil {
		return err
	}
	var bound []*kafkaListener
	defer func() {
		if err != nil {
			for _, kl := range bound {
				_ = kl.ln.Close() // undoing a failed Listen; its error is the one to report
			}
		}
	}()
	for _, l := range ls {
		ln, err := net.Listen("tcp", l.Addr())
		if err != nil {
			return fmt.Errorf("listener %s: %w", l, err)
		}
		bound = append(bound, &kafkaListener{Listener: l, ln: ln})
	}
	if err := b.advertiseClients(bound); err != nil {
		return err
	}
	for _, kl := range bound {
		if err := b.secureListener(kl); err != nil {
			return fmt.Errorf("listener %s: %w", kl.Listener, err)
		}
	}
	b.listeners = bound
	return nil
}

// advertiseClients sets each listener's advertised address. The legacy
// listener (no --listeners) advertises --kafka-advertise, or its bound
// address when that is not set or is the listen address itself (port 0);
// listeners from --listeners advertise their --advertised-listeners entry,
// or the address they bind, with the bound port in place of 0.
func (b *Server) advertiseClients(bound []*kafkaListener) error {
	if b.Cfg.Listeners == "" {
		kl := bound[0]
		kl.advertise = b.Cfg.KafkaAdvertise
		if kl.advertise == "" || kl.advertise == b.Cfg.KafkaListen {
			kl.advertise = kl.ln.Addr().String()
		}
		return nil
	}
	// Read against every listener: the inter-broker one, which is not
	// bound here, may have an entry too.
	all, err := b.Cfg.AllListeners()
	if err != nil {
		return err
	}
	adv, err := listener.ParseAdvertised(b.Cfg.AdvertisedListeners, all)
	if err != nil {
		return err
	}
	for _, kl := range bound {
		a, ok := listener.Lookup(adv, kl.Name)
		if !ok {
			return fmt.Errorf("listener %s has no advertised address", kl.Name) // unreachable: bound ⊂ all
		}
		if a.Port == 0 {
			a.Port = kl.ln.Addr().(*net.TCPAddr).Port
		}
		kl.advertise = net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
	}
	return nil
}

// secureListener gives a listener its TLS source and SASL settings. An SSL
// listener with a client CA requires a client certificate (its user is the
// principal); a SASL_SSL one verifies a certificate the client gives, but
// the principal is the SASL one.
func (b *Server) secureListener(kl *kafkaListener) error {
	cfg := b.Cfg.ListenerConfig
	if kl.Protocol.TLS() {
		opts := []listener.Option{
			listener.OnReloadError(func(err error) {
				b.Logger.Warn().Err(err).Str("listener", kl.Name).Msg("TLS reload failed; serving the previous certificate")
			}),
		}
		if kl.Protocol == listener.SSL && cfg.TLSClientCAFile != "" {
			opts = append(opts, listener.RequireClientCert())
		}
		src, err := listener.NewTLSSource(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile, opts...)
		if err != nil {
			return err
		}
		kl.tls = src
	}
	if kl.Protocol.SASL() {
		lookup := b.credentials
		if lookup == nil {
			lookup = cfg.SASLCredentials
		}
		if lookup == nil {
			return errors.New("a SASL listener needs a credential lookup (none was configured)")
		}
		sc := auth.SessionConfig{
			Mechanisms:       cfg.SASLEnabledMechanisms,
			Lookup:           lookup,
			AllowPlain:       kl.Protocol.TLS() || cfg.AllowPlainWithoutTLS,
			SessionLifetime:  cfg.SASLSessionLifetime,
			StrictScramNonce: cfg.SASLScramStrictNonce,
			Now:              b.now,
		}
		if _, err := auth.NewSession(sc); err != nil {
			return err // checked once here so that no connection meets it
		}
		kl.sasl = &sc
	}
	return nil
}

// AdvertisedListeners is the advertised host:port of each client listener
// by name, for the broker's registration (meta.BrokerInfo.Listeners).
func (b *Server) AdvertisedListeners() map[string]string {
	out := make(map[string]string, len(b.listeners))
	for _, kl := range b.listeners {
		out[kl.Name] = kl.advertise
	}
	return out
}

// ListenerAddr is the bound address of the client listener named name, ""
// when there is none.
func (b *Server) ListenerAddr(name string) string {
	for _, kl := range b.listeners {
		if kl.Name == name {
			return kl.ln.Addr().String()
		}
	}
	return ""
}

// listenerAddress is the address of broker bi for a client that came in on
// the listener named name: its registered address for that listener, its
// Kafka address when its registration predates listeners, or "" when it
// has no such listener (Kafka leaves such a broker out of Metadata).
func (b *Server) listenerAddress(id int32, kafka string, listeners map[string]string, name string) string {
	if id == b.Cfg.NodeID {
		for _, kl := range b.listeners {
			if kl.Name == name {
				return kl.advertise
			}
		}
	}
	if len(listeners) == 0 {
		return kafka
	}
	return listeners[name]
}
