package broker

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn is a Kafka connection driven byte by byte, for tests that need to
// misbehave or to see exactly when the broker closes a connection.
type rawConn struct {
	t  testing.TB
	nc net.Conn
}

// dialRaw connects to the broker's Kafka listener, from localIP if it is not
// empty (any 127.0.0.0/8 address works on loopback).
func dialRaw(t testing.TB, b *Broker, localIP string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second}
	if localIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(localIP)}
	}
	nc, err := d.Dial("tcp", b.KafkaAddr())
	if err != nil {
		t.Fatalf("dial %s: %v", b.KafkaAddr(), err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// roundTrip sends req and decodes its response into resp (which must be of
// the same version), failing the test on any error.
func (c *rawConn) roundTrip(req kmsg.Request, resp kmsg.Response) {
	c.t.Helper()
	if err := c.tryRoundTrip(req, resp, 30*time.Second); err != nil {
		c.t.Fatalf("%s round trip: %v", kmsg.NameForKey(req.Key()), err)
	}
}

func (c *rawConn) tryRoundTrip(req kmsg.Request, resp kmsg.Response, timeout time.Duration) error {
	if _, err := c.nc.Write(brokertest.EncodeRequest(req, 1)); err != nil {
		return err
	}
	if err := c.nc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, frame); err != nil {
		return err
	}
	body := frame[4:] // correlation id
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:] // empty header tags
	}
	return resp.ReadFrom(body)
}

// apiVersions checks that the broker answers on c.
func (c *rawConn) apiVersions() {
	c.t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	resp := req.ResponseKind()
	resp.SetVersion(0)
	c.roundTrip(req, resp)
}

// waitClosed fails the test unless the broker closes c before timeout. The
// read blocks until the close (or the deadline); nothing sleeps.
func (c *rawConn) waitClosed(timeout time.Duration) {
	c.t.Helper()
	if err := c.nc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		c.t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		_, err := c.nc.Read(buf)
		var ne net.Error
		switch {
		case err == nil:
			continue // a reply still in flight
		case errors.As(err, &ne) && ne.Timeout():
			c.t.Fatalf("the broker did not close the connection within %v", timeout)
		default:
			return // EOF or reset: closed
		}
	}
}

// metricValue is the value of b's metric name (a counter or gauge) whose
// labels include the given name=value pairs; 0 if there is none.
func metricValue(t testing.TB, b *Broker, name string, labels ...string) float64 {
	t.Helper()
	m := findMetric(t, b, name, labels...)
	if m == nil {
		return 0
	}
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

// findMetric is b's first series of metric name whose labels include the
// given name=value pairs, nil if there is none.
func findMetric(t testing.TB, b *Broker, name string, labels ...string) *dto.Metric {
	t.Helper()
	mfs, err := b.M.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
				}
				if !found {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}
