package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/history"
)

func TestSendOutcome(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		outcome history.Outcome
		errName string // for fail: the Kafka error name
	}{
		{"acknowledged", nil, history.OK, ""},
		{"message too large", kerr.MessageTooLarge, history.Fail, "MESSAGE_TOO_LARGE"},
		{"invalid record", kerr.InvalidRecord, history.Fail, "INVALID_RECORD"},
		{"topic authorization", kerr.TopicAuthorizationFailed, history.Fail, "TOPIC_AUTHORIZATION_FAILED"},
		{"wrapped definite error", fmt.Errorf("produce: %w", kerr.RecordListTooLarge), history.Fail, "RECORD_LIST_TOO_LARGE"},
		{"record timeout", kgo.ErrRecordTimeout, history.Info, ""},
		{"retries exhausted around a definite error", fmt.Errorf("%w: %w", kgo.ErrRecordRetries, kerr.MessageTooLarge), history.Info, ""},
		{"timeout around a definite error", fmt.Errorf("%w: %w", kgo.ErrRecordTimeout, kerr.InvalidRecord), history.Info, ""},
		{"client closed", kgo.ErrClientClosed, history.Info, ""},
		{"context cancelled", context.Canceled, history.Info, ""},
		{"deadline", context.DeadlineExceeded, history.Info, ""},
		{"retriable Kafka error", kerr.NotLeaderForPartition, history.Info, ""},
		{"request timed out", kerr.RequestTimedOut, history.Info, ""},
		{"not enough replicas after append", kerr.NotEnoughReplicasAfterAppend, history.Info, ""},
		{"non-retriable but not definite", kerr.UnknownServerError, history.Info, ""},
		{"out of order sequence", kerr.OutOfOrderSequenceNumber, history.Info, ""},
		{"connection error", io.ErrUnexpectedEOF, history.Info, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outcome, why := sendOutcome(tc.err)
			if outcome != tc.outcome {
				t.Fatalf("sendOutcome(%v) = %s (%q), want %s", tc.err, outcome, why, tc.outcome)
			}
			switch outcome {
			case history.OK:
				if why != "" {
					t.Errorf("ok with error %q", why)
				}
			case history.Fail:
				if why != tc.errName {
					t.Errorf("fail named %q, want %q", why, tc.errName)
				}
			case history.Info:
				if why == "" {
					t.Error("info without a reason")
				}
			}
		})
	}
}

func TestCommitOutcome(t *testing.T) {
	illegal := kerr.IllegalGeneration.Code
	for _, tc := range []struct {
		name     string
		reqErr   error
		code     int16
		answered bool
		writes   int64
		outcome  history.Outcome
	}{
		{"accepted", nil, 0, true, 1, history.OK},
		{"accepted after a retry", nil, 0, true, 2, history.OK},
		{"illegal generation, one request", nil, illegal, true, 1, history.Fail},
		{"unknown member, one request", nil, kerr.UnknownMemberID.Code, true, 1, history.Fail},
		{"rebalance in progress, one request", nil, kerr.RebalanceInProgress.Code, true, 1, history.Fail},
		{"illegal generation after a retry", nil, illegal, true, 2, history.Info},
		{"retriable coordinator error", nil, kerr.NotCoordinator.Code, true, 1, history.Info},
		{"request timed out", nil, kerr.RequestTimedOut.Code, true, 1, history.Info},
		{"partition not answered", nil, 0, false, 1, history.Info},
		{"request error", errors.New("connection reset"), 0, false, 1, history.Info},
		{"cancelled before sending", context.Canceled, 0, false, 0, history.Info},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outcome, why := commitOutcome(tc.reqErr, tc.code, tc.answered, tc.writes)
			if outcome != tc.outcome {
				t.Fatalf("commitOutcome = %s (%q), want %s", outcome, why, tc.outcome)
			}
			if (outcome == history.OK) != (why == "") {
				t.Errorf("outcome %s with error %q", outcome, why)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	rec, err := history.NewRecorder(io.Discard, history.Header{Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	good := Config{Bootstrap: []string{"127.0.0.1:9092"}, Topic: "t", Partitions: 2, Producers: 1, Group: "g", Members: 1, Recorder: rec}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	if d := good.withDefaults(); d.Keys != 8 || d.Rate != DefaultRate || d.ReplicationFactor != 3 || d.FirstProcess != 1 || d.RebalanceTimeout != 2*DefaultSessionTimeout {
		t.Errorf("defaults: %+v", d)
	}
	for name, mutate := range map[string]func(*Config){
		"no bootstrap":        func(c *Config) { c.Bootstrap = nil },
		"no topic":            func(c *Config) { c.Topic = "" },
		"no partitions":       func(c *Config) { c.Partitions = 0 },
		"members, no group":   func(c *Config) { c.Group = "" },
		"no recorder":         func(c *Config) { c.Recorder = nil },
		"rate below one each": func(c *Config) { c.Producers, c.Rate = 4, 2 },
		"negative timeout":    func(c *Config) { c.StopTimeout = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			c := good
			mutate(&c)
			if err := c.Validate(); err == nil {
				t.Errorf("Validate accepted %+v", c)
			}
		})
	}
}

// TestKgoLoggerKeepsProducerIDMessages: of kgo's info messages only those
// about the producer id or epoch reach the log (a client epoch bump is
// what explains a duplicate), with warnings and errors; debug never.
func TestKgoLoggerKeepsProducerIDMessages(t *testing.T) {
	var buf bytes.Buffer
	l := kgoLogger{log: zerolog.New(&buf)}
	for _, c := range []struct {
		level kgo.LogLevel
		msg   string
		kept  bool
	}{
		{kgo.LogLevelInfo, "locally bumping idempotent producer epoch to recover from a prior produce error", true},
		{kgo.LogLevelInfo, "batch errored with OUT_OF_ORDER_SEQUENCE_NUMBER, failing the producer ID and resetting all sequence numbers", true},
		{kgo.LogLevelInfo, "assigning partitions", false},
		{kgo.LogLevelDebug, "resetting produce sequence numbers to 0 for new producer epoch", false},
		{kgo.LogLevelWarn, "unable to open connection to broker", true},
		{kgo.LogLevelError, "group manage loop errored", true},
	} {
		buf.Reset()
		l.Log(c.level, c.msg)
		if got := strings.Contains(buf.String(), c.msg); got != c.kept {
			t.Errorf("level %v %q: logged %v, want %v", c.level, c.msg, got, c.kept)
		}
	}
}
