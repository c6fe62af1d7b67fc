package loadgen

// This file owns the run configuration: defaults, validation, and the
// scenario defaults applied to fields left empty.

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Systems a run can target.
const (
	SystemKafka     = "kafka"
	SystemJetStream = "jetstream"
	SystemHTTP      = "http" // Sluice's HTTP publish API; consumers (if any) over Kafka
)

// Consumer modes.
const (
	ConsumerAuto   = "auto"   // group if the cluster serves JoinGroup, else assign
	ConsumerGroup  = "group"  // a consumer group (JetStream: one shared durable pull consumer)
	ConsumerAssign = "assign" // direct partition consumption, partitions split round-robin
)

// ErrInvalidConfig marks a configuration rejected by Validate.
var ErrInvalidConfig = errors.New("loadgen: invalid config")

// Config is one run. Zero-valued Sizes and Keys take the scenario's default.
type Config struct {
	System   string   // SystemKafka, SystemJetStream or SystemHTTP
	Brokers  []string // Kafka bootstrap addresses (http: for consumers only; empty: none)
	NATSURL  string   // JetStream server URL
	HTTPURL  string   // HTTP API base URL, e.g. http://127.0.0.1:8080
	Security Security // TLS and SASL of the Kafka clients
	Label    string   // free text carried into the report (e.g. "sync_interval=always")
	Scenario string   // one of Scenarios()
	Topic    string   // default: loadgen-<scenario>-<unix nanos>
	// TopicConfigs are set on the topic the run creates (kafka), e.g.
	// remote.storage.enable=true for a tiered topic.
	TopicConfigs map[string]string

	Partitions        int
	ReplicationFactor int // of a created topic; -1: the broker's default (kafka, http)
	Producers         int
	Consumers         int // 0: produce only (steady, hot-key, large-payloads)

	Rate     float64       // records/s over all producers; 0: as fast as possible (closed loop)
	Duration time.Duration // length of the measured production phase

	Sizes string // fixed:N | uniform:A-B | mix:S*W,S*W,... (sizes accept k/KiB/m/MiB)
	Keys  string // none | uniform:N | zipf:N[:S]

	Linger     time.Duration
	BatchBytes int
	Idempotent bool
	Acks       string // all | leader | none
	InFlight   int    // records a producer may have unacknowledged (buffered + in flight)
	HTTPBatch  int    // http: messages per publish request

	ConsumerMode   string
	Group          string        // default: loadgen-<topic>
	SessionTimeout time.Duration // group session timeout; JetStream AckWait
	CommitInterval time.Duration // auto-commit interval of group members

	PeakFactor   float64       // peak: rate multiplier of the peak phase
	PeakDuration time.Duration // peak: length of the peak phase (default Duration/3)
	DrainTimeout time.Duration // peak drain and final catch-up give up after this
	Prefill      int           // replay: records written before the group starts (default Rate*Duration)
	CrashAfter   time.Duration // consumer-crash: when member 0 is killed (default Duration/3)

	Cleanup  bool          // delete the topic/stream at the end
	Progress bool          // live progress line on stderr every ProgressInterval
	Interval time.Duration // sampling interval of the per-second series

	JSON    bool   // print the result as JSON instead of a table
	CSVPath string // per-interval CSV
	SVGPath string // chart
}

// DefaultConfig is a modest steady run against a local broker.
func DefaultConfig() Config {
	return Config{
		System:            SystemKafka,
		Brokers:           []string{"127.0.0.1:9092"},
		NATSURL:           "nats://127.0.0.1:4222",
		HTTPURL:           "http://127.0.0.1:8080",
		Scenario:          ScenarioSteady,
		Partitions:        6,
		ReplicationFactor: -1,
		Producers:         1,
		Consumers:         1,
		Rate:              1000,
		Duration:          10 * time.Second,
		Linger:            0, // Kafka's classic linger.ms; batches still form while requests are in flight
		BatchBytes:        1 << 20,
		Idempotent:        true,
		Acks:              "all",
		InFlight:          10000,
		HTTPBatch:         1,
		ConsumerMode:      ConsumerAuto,
		SessionTimeout:    6 * time.Second,
		CommitInterval:    5 * time.Second,
		PeakFactor:        3,
		DrainTimeout:      30 * time.Second,
		Cleanup:           true,
		Progress:          true,
		Interval:          time.Second,
	}
}

// Validate checks every field and the parseable specs.
func (c Config) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	switch c.System {
	case SystemKafka:
		if len(c.Brokers) == 0 {
			bad("kafka needs at least one broker address")
		}
	case SystemJetStream:
		if c.NATSURL == "" {
			bad("jetstream needs a NATS URL")
		}
	case SystemHTTP:
		if u, err := url.Parse(c.HTTPURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("http needs an http:// or https:// URL of the HTTP API, not %q", c.HTTPURL)
		}
		if c.Consumers > 0 && len(c.Brokers) == 0 {
			bad("http publishes over HTTP and consumes over Kafka: consumers need --brokers, or run with --consumers 0")
		}
		if c.Acks != "all" {
			bad("http publishes are acknowledged once in sync (acks=all); acks %q does not apply", c.Acks)
		}
		if c.HTTPBatch < 1 {
			bad("http batch %d < 1", c.HTTPBatch)
		}
	default:
		bad("system %q is not kafka, jetstream or http", c.System)
	}
	if _, ok := scenarios[c.Scenario]; !ok {
		bad("scenario %q is not one of %s", c.Scenario, strings.Join(Scenarios(), ", "))
	}
	if c.Partitions < 1 {
		bad("partitions %d < 1", c.Partitions)
	}
	if c.ReplicationFactor < 1 && c.ReplicationFactor != -1 {
		bad("replication factor %d is neither -1 (the broker's default) nor >= 1", c.ReplicationFactor)
	}
	if c.Producers < 1 {
		bad("producers %d < 1", c.Producers)
	}
	if c.Consumers < 0 {
		bad("consumers %d < 0", c.Consumers)
	}
	if c.Rate < 0 {
		bad("rate %v < 0", c.Rate)
	}
	if c.Duration <= 0 {
		bad("duration %v <= 0", c.Duration)
	}
	if c.Sizes != "" {
		if _, err := ParseSizes(c.Sizes); err != nil {
			bad("%v", err)
		}
	}
	if c.Keys != "" {
		if _, err := ParseKeys(c.Keys); err != nil {
			bad("%v", err)
		}
	}
	if c.Linger < 0 {
		bad("linger %v < 0", c.Linger)
	}
	if c.BatchBytes < 1024 {
		bad("batch bytes %d < 1024", c.BatchBytes)
	}
	switch c.Acks {
	case "all", "leader", "none":
		if c.Acks != "all" && c.Idempotent && c.System == SystemKafka {
			bad("idempotence requires acks=all")
		}
	default:
		bad("acks %q is not all, leader or none", c.Acks)
	}
	if c.InFlight < 1 {
		bad("in-flight %d < 1", c.InFlight)
	}
	switch c.ConsumerMode {
	case ConsumerAuto, ConsumerGroup, ConsumerAssign:
	default:
		bad("consumer mode %q is not auto, group or assign", c.ConsumerMode)
	}
	if c.SessionTimeout <= 0 || c.CommitInterval <= 0 {
		bad("session timeout and commit interval must be positive")
	}
	if c.PeakFactor < 1 {
		bad("peak factor %v < 1", c.PeakFactor)
	}
	if c.PeakDuration < 0 || c.DrainTimeout <= 0 || c.CrashAfter < 0 || c.Prefill < 0 {
		bad("peak duration, crash-after and prefill must be >= 0, drain timeout > 0")
	}
	if c.Interval <= 0 {
		bad("interval %v <= 0", c.Interval)
	}
	switch c.Scenario {
	case ScenarioPeak:
		if c.Rate == 0 {
			bad("peak needs a target rate")
		}
		if c.Consumers == 0 {
			bad("peak needs consumers to measure the drain")
		}
	case ScenarioReplay:
		if c.Consumers == 0 {
			bad("replay needs consumers")
		}
	case ScenarioConsumerCrash:
		if c.Consumers < 2 {
			bad("consumer-crash needs at least 2 consumers")
		}
		if c.ConsumerMode == ConsumerAssign {
			bad("consumer-crash needs a consumer group")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(errs, "; "))
	}
	return nil
}

// resolved returns the config with scenario defaults filled in.
func (c Config) resolved(now time.Time) Config {
	s := scenarios[c.Scenario]
	if c.Sizes == "" {
		c.Sizes = s.sizes
	}
	if c.Keys == "" {
		c.Keys = s.keys
	}
	if c.Topic == "" {
		c.Topic = fmt.Sprintf("loadgen-%s-%d", c.Scenario, now.UnixNano())
	}
	if c.Group == "" {
		c.Group = "loadgen-" + c.Topic
	}
	if c.System == SystemHTTP {
		c.Idempotent = false // HTTP publishes carry no producer id (http.go), and the report says so
	}
	if c.PeakDuration == 0 {
		c.PeakDuration = c.Duration / 3
	}
	if c.CrashAfter == 0 {
		c.CrashAfter = c.Duration / 3
	}
	if c.Prefill == 0 {
		rate := c.Rate
		if rate == 0 {
			rate = 10000
		}
		c.Prefill = int(rate * c.Duration.Seconds())
	}
	return c
}
