package loadgen

// This file owns the Kafka clients' security: TLS to the listener (with a
// CA file) and SASL (SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN), so a secured
// listener can be measured beside a plaintext one (BENCHMARKS.md).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security is how the Kafka clients reach a secured listener; the zero
// value is PLAINTEXT.
type Security struct {
	TLSCAFile        string // verify the listener's certificate with this CA; "" with TLS false: no TLS
	TLS              bool   // TLS with the system roots when TLSCAFile is empty
	SASLMechanism    string // SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN; "": none
	SASLUser         string
	SASLPasswordFile string // its first line is the password
}

// tlsConfig is the clients' TLS, or nil without TLS.
func (s Security) tlsConfig() (*tls.Config, error) {
	if !s.TLS && s.TLSCAFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.TLSCAFile != "" {
		pem, err := os.ReadFile(s.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("loadgen: TLS CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("loadgen: TLS CA %s holds no certificate", s.TLSCAFile)
		}
	}
	return cfg, nil
}

// mechanism is the clients' SASL mechanism, or nil.
func (s Security) mechanism() (sasl.Mechanism, error) {
	if s.SASLMechanism == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(s.SASLPasswordFile)
	if err != nil {
		return nil, fmt.Errorf("loadgen: SASL password: %w", err)
	}
	pass, _, _ := strings.Cut(string(raw), "\n")
	switch strings.ToUpper(s.SASLMechanism) {
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.SASLUser, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.SASLUser, Pass: pass}.AsSha512Mechanism(), nil
	case "PLAIN":
		return plain.Auth{User: s.SASLUser, Pass: pass}.AsMechanism(), nil
	}
	return nil, fmt.Errorf("loadgen: SASL mechanism %q: use SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", s.SASLMechanism)
}

// opts are the client options of s. dial, when not nil, is the dialer the
// client must use (the consumers' killable one); TLS then runs over it.
func (s Security) opts(dial func(ctx context.Context, network, addr string) (net.Conn, error)) ([]kgo.Opt, error) {
	var out []kgo.Opt
	tlsCfg, err := s.tlsConfig()
	if err != nil {
		return nil, err
	}
	switch {
	case tlsCfg != nil && dial != nil:
		out = append(out, kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			cfg := tlsCfg.Clone()
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
			tc := tls.Client(c, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				_ = c.Close()
				return nil, err
			}
			return tc, nil
		}))
	case tlsCfg != nil:
		out = append(out, kgo.DialTLSConfig(tlsCfg))
	case dial != nil:
		out = append(out, kgo.Dialer(dial))
	}
	m, err := s.mechanism()
	if err != nil {
		return nil, err
	}
	if m != nil {
		out = append(out, kgo.SASL(m))
	}
	return out, nil
}
