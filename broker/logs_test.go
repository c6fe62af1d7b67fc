package broker

// Tests of what a cluster's brokers log, read back as the JSON lines an
// operator gets: one info line per leader election, and no key written
// twice in a line.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/rs/zerolog"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// logCapture keeps every line written to it; zerolog writes one event per
// Write, from any goroutine.
type logCapture struct {
	mu    sync.Mutex
	lines [][]byte // guarded by mu
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.lines = append(c.lines, bytes.Clone(p))
	c.mu.Unlock()
	return len(p), nil
}

// since is the lines written from the n-th on.
func (c *logCapture) since(n int) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.lines[min(n, len(c.lines)):]...)
}

func (c *logCapture) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.lines)
}

// decodeLogLine decodes a JSON log line, refusing one in which a key of an
// object appears twice (encoding/json would keep the last silently).
func decodeLogLine(line []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := checkJSONKeys(dec, ""); err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// checkJSONKeys reads one JSON value from dec, failing on a repeated key.
func checkJSONKeys(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k := kt.(string)
			if seen[k] {
				return fmt.Errorf("key %q written twice", path+k)
			}
			seen[k] = true
			if err := checkJSONKeys(dec, path+k+"."); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	case json.Delim('['):
		for dec.More() {
			if err := checkJSONKeys(dec, path); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	}
	return err
}

func TestDecodeLogLineRefusesRepeatedKeys(t *testing.T) {
	for _, tt := range []struct {
		line string
		ok   bool
	}{
		{`{"level":"info","component":"broker","node":1,"message":"m"}`, true},
		{`{"a":{"b":1},"c":[{"b":2},{"b":3}]}`, true},
		{`{"component":"broker","node":1,"component":"elector"}`, false},
		{`{"a":{"b":1,"b":2}}`, false},
		{`{"a":[{"b":1,"b":2}]}`, false},
	} {
		if _, err := decodeLogLine([]byte(tt.line)); (err == nil) != tt.ok {
			t.Errorf("%s: error %v, want ok=%v", tt.line, err, tt.ok)
		}
	}
}

// A broker leaving a cluster makes the controller elect new leaders for the
// partitions it led. Each election is one info line, on the controller,
// naming the topic, partition, epoch, leader, cause and duration; the fences,
// the CAS and each replica's new epoch are debug. And no line of any broker,
// at any level, writes a key twice (a component logger derived from one that
// already had a component did).
func TestClusterLogsOneInfoLinePerElectionAndNoRepeatedKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	caps := []*logCapture{{}, {}, {}}
	c := startTestClusterLogged(t, 3, nil, func(node int32) zerolog.Logger {
		return zerolog.New(caps[node-1]).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	})
	const topic, parts = "elect", 6
	createReplicatedTopic(t, testClient(t, c.brokers[0]), topic, parts, 3)

	// The victim is a broker that leads a partition and is not the
	// controller, so the controller's line of each election is kept.
	var ctl int32
	eventuallyTrue(t, "a controller is known", func() (bool, string) {
		ctl = c.brokers[0].ControllerID()
		return ctl > 0, "none yet"
	})
	led := map[int32][]int32{} // broker → partitions it leads
	eventuallyTrue(t, "every partition has a leader", func() (bool, string) {
		clear(led)
		tp := c.brokers[ctl-1].LookupTopic(topic)
		if tp == nil {
			return false, "topic not known yet"
		}
		for i, st := range tp.States {
			if st.Leader <= 0 {
				return false, fmt.Sprintf("partition %d has no leader", i)
			}
			led[st.Leader] = append(led[st.Leader], int32(i))
		}
		return true, ""
	})
	var victim int32
	for id, ps := range led {
		if id != ctl && len(ps) > 0 {
			victim = id
		}
	}
	if victim == 0 {
		t.Fatalf("only the controller (%d) leads partitions: %v", ctl, led)
	}
	marks := make([]int, len(caps))
	for i, lc := range caps {
		marks[i] = lc.len()
	}
	c.stops[victim-1]()
	eventuallyTrue(t, "the victim's partitions have other leaders", func() (bool, string) {
		tp := c.brokers[ctl-1].LookupTopic(topic)
		for _, i := range led[victim] {
			if l := tp.States[i].Leader; l <= 0 || l == victim {
				return false, fmt.Sprintf("partition %d led by %d", i, l)
			}
		}
		return true, ""
	})

	t.Run("one info line per election", func(t *testing.T) {
		// Lines about partitions of the topic since the victim stopped, on
		// the brokers that stay. The controller logs an election once its
		// write is answered, which may be after the watch above saw it.
		var elected, info []map[string]any
		eventuallyTrue(t, "every election is logged", func() (bool, string) {
			elected, info = nil, nil
			for i, lc := range caps {
				if int32(i+1) == victim {
					continue
				}
				for _, line := range lc.since(marks[i]) {
					var m map[string]any // repeated keys are the other subtest's
					err := json.Unmarshal(line, &m)
					if err != nil || m["topic"] != topic || m["partition"] == nil || m["level"] != "info" {
						continue
					}
					info = append(info, m)
					if m["message"] == "leader elected" {
						elected = append(elected, m)
					}
				}
			}
			return len(elected) >= len(led[victim]), fmt.Sprintf("%d leader elected lines", len(elected))
		})
		if len(elected) != len(led[victim]) {
			t.Errorf("%d leader elected lines, want %d (one per partition broker %d led)", len(elected), len(led[victim]), victim)
		}
		if len(info) != len(elected) {
			for _, m := range info {
				t.Logf("node %v: %v", m["node"], m["message"])
			}
			t.Errorf("%d info lines about the topic's partitions for %d elections, want one each", len(info), len(elected))
		}
		for _, m := range elected {
			for _, k := range []string{"epoch", "leader", "old_leader", "cause", "duration_ms"} {
				if m[k] == nil {
					t.Errorf("leader elected line without %s: %v", k, m)
				}
			}
			if m["node"] != float64(ctl) {
				t.Errorf("leader elected logged by node %v, want the controller %d", m["node"], ctl)
			}
		}
	})

	t.Run("no key written twice", func(t *testing.T) {
		n := 0
		for i, lc := range caps {
			for _, line := range lc.since(0) {
				n++
				if _, err := decodeLogLine(line); err != nil {
					t.Errorf("node %d: %v: %s", i+1, err, bytes.TrimSpace(line))
				}
			}
		}
		if n == 0 {
			t.Fatal("no lines captured")
		}
	})
}

// startLoggedBroker is startBroker with the broker's logger writing to w at
// debug.
func startLoggedBroker(t *testing.T, cfg Config, w io.Writer) *Broker {
	t.Helper()
	b, err := New(cfg, zerolog.New(w).Level(zerolog.DebugLevel))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		awaitStop(t, errc, "broker")
	})
	select {
	case <-b.Ready():
	case err := <-errc:
		t.Fatalf("broker stopped before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("broker not ready after 60s")
	}
	return b
}

// A client's mistake (an oversized or unparsable frame, an API the broker
// does not serve) or its disconnect closes its connection and is logged at
// debug: the client sees it, the operator's log at info does not.
func TestClientMistakesLoggedAtDebug(t *testing.T) {
	var logs logCapture
	b := startLoggedBroker(t, testBrokerConfig(t), &logs)
	unserved := kmsg.NewPtrDescribeClusterRequest()
	unserved.SetVersion(0)
	garbage := []byte{0, 0, 0, 8, 0, 3, 0, 0, 0, 0, 0, 1} // Metadata v0, no client id length
	for _, tt := range []struct {
		name  string
		frame []byte
	}{
		{"oversized frame", binary.BigEndian.AppendUint32(nil, 1<<31-1)},
		{"unparsable request", garbage},
		{"unserved api", brokertest.EncodeRequest(unserved, 1)},
		{"truncated frame", []byte{0, 0, 1, 0, 0, 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mark := logs.len()
			c := dialRaw(t, b, "")
			if _, err := c.nc.Write(tt.frame); err != nil {
				t.Fatal(err)
			}
			if tt.name == "truncated frame" {
				_ = c.nc.(*net.TCPConn).CloseWrite() // the client gives up mid-request
			}
			// The broker logs before it closes: once the close is seen,
			// the line is written.
			if err := c.nc.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadAll(c.nc); err != nil {
				t.Fatalf("the broker did not close the connection: %v", err)
			}
			var closing []map[string]any
			for _, line := range logs.since(mark) {
				m, err := decodeLogLine(line)
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(m["message"].(string), "closing connection") {
					closing = append(closing, m)
				}
			}
			if len(closing) != 1 {
				t.Fatalf("%d closing lines, want 1: %v", len(closing), closing)
			}
			if closing[0]["level"] != "debug" {
				t.Errorf("logged at %v, want debug: %v", closing[0]["level"], closing[0])
			}
		})
	}
}

// A remote read that fails because its reader gave up (an HTTP consumer
// ending its long poll cancels the request's context) is the reader's
// business: debug. Any other failure is a warning.
func TestReaderLevel(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("tier: read: %w", context.Canceled), "debug"},
		{fmt.Errorf("tier: read: %w", context.DeadlineExceeded), "warn"},
		{errors.New("s3: 503"), "warn"},
	} {
		var logs logCapture
		node.ReaderLevel(zerolog.New(&logs), tt.err).Err(tt.err).Msg("remote read failed")
		m, err := decodeLogLine(logs.since(0)[0])
		if err != nil || m["level"] != tt.want {
			t.Errorf("%v: logged %v (%v), want %s", tt.err, m, err, tt.want)
		}
	}
}
