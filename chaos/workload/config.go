package workload

// This file owns the workload's configuration: its fields, their defaults
// and Validate. A Config is a value; Run works on a defaulted copy.

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/chaos/history"
)

// Config configures a workload.
type Config struct {
	// Bootstrap lists Kafka listener addresses ("host:port") of the cluster.
	Bootstrap []string
	// Topic is the one topic of the run; Run creates it when missing with
	// Partitions, ReplicationFactor and TopicConfigs.
	Topic        string
	Partitions   int32
	TopicConfigs map[string]string
	// ReplicationFactor of a topic Run creates; default 3.
	ReplicationFactor int16
	// Keys is the number of keys k0..k{Keys-1}; default 4 per partition.
	Keys int
	// Producers is the number of idempotent producers; Rate the sends per
	// second over all of them (default 1000 when there are producers).
	Producers int
	Rate      int
	// LibrdkafkaProducers adds that many idempotent librdkafka producers
	// (confluent-kafka-python run with Python, default DefaultPython;
	// rdkafka.go) beside the kgo ones, sharing Rate with them.
	LibrdkafkaProducers int
	Python              string
	// Group and Members: the consumer group and how many members poll in it.
	Group   string
	Members int
	// Readers starts one reader per partition.
	Readers bool
	// SessionTimeout of group members (the broker's
	// --group-min-session-timeout must allow it); default 10 s. A crashed
	// member's partitions move after it. The heartbeat interval is a fifth
	// of it; the rebalance timeout (RebalanceTimeout, default twice it)
	// bounds how long a rebalance waits for members to rejoin.
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// DeliveryTimeout bounds how long a send not yet written to a broker
	// waits for one (kgo's RecordDeliveryTimeout; a send in flight waits for
	// its answer); default 20 s.
	DeliveryTimeout time.Duration
	// StopTimeout bounds how long Stop waits for producers to flush before
	// it closes them (what is left becomes info); default 30 s.
	StopTimeout time.Duration
	// FirstProcess is the first process id the workload allocates; its
	// clients take ids upward from it. Default 1.
	FirstProcess history.Process
	// Recorder receives every event.
	Recorder *history.Recorder
	// Logger for the workload and, at warn level, for kgo; zero value: none.
	Logger zerolog.Logger
	// Seed seeds the producers' choice of keys.
	Seed uint64
}

// Defaults.
const (
	DefaultReplicationFactor = 3
	DefaultRate              = 1000
	DefaultSessionTimeout    = 10 * time.Second
	DefaultDeliveryTimeout   = 20 * time.Second
	DefaultStopTimeout       = 30 * time.Second
	keysPerPartition         = 4
)

// withDefaults returns c with every unset tunable at its default.
func (c Config) withDefaults() Config {
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.Keys == 0 {
		c.Keys = keysPerPartition * int(c.Partitions)
	}
	if c.Python == "" {
		c.Python = DefaultPython
	}
	if c.Rate == 0 && c.Producers+c.LibrdkafkaProducers > 0 {
		c.Rate = DefaultRate
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = 2 * c.SessionTimeout
	}
	if c.DeliveryTimeout == 0 {
		c.DeliveryTimeout = DefaultDeliveryTimeout
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.FirstProcess == 0 {
		c.FirstProcess = 1
	}
	return c
}

// Validate reports whether c (after defaults) can run.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case len(c.Bootstrap) == 0:
		return errors.New("workload: config: no bootstrap address")
	case c.Topic == "":
		return errors.New("workload: config: no topic")
	case c.Partitions <= 0:
		return fmt.Errorf("workload: config: %d partitions", c.Partitions)
	case c.ReplicationFactor <= 0:
		return fmt.Errorf("workload: config: replication factor %d", c.ReplicationFactor)
	case c.Keys <= 0:
		return fmt.Errorf("workload: config: %d keys", c.Keys)
	case c.Producers < 0 || c.LibrdkafkaProducers < 0 || c.Members < 0:
		return fmt.Errorf("workload: config: %d producers, %d librdkafka producers, %d members", c.Producers, c.LibrdkafkaProducers, c.Members)
	case c.Producers+c.LibrdkafkaProducers > 0 && c.Rate < c.Producers+c.LibrdkafkaProducers:
		return fmt.Errorf("workload: config: rate %d/s is below one send per second per producer (%d)", c.Rate, c.Producers+c.LibrdkafkaProducers)
	case c.Members > 0 && c.Group == "":
		return errors.New("workload: config: members without a group")
	case c.SessionTimeout < 0 || c.RebalanceTimeout < 0 || c.DeliveryTimeout < 0 || c.StopTimeout < 0:
		return errors.New("workload: config: a negative timeout")
	case c.FirstProcess < 0:
		return fmt.Errorf("workload: config: first process %d", c.FirstProcess)
	case c.Recorder == nil:
		return errors.New("workload: config: no recorder")
	}
	return nil
}
