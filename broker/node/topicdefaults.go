package node

// topicdefaults.go owns the broker-wide defaults of topic settings
// (--default-retention-ms, --default-min-insync-replicas,
// --default-replication-factor) and the values a topic's configs describe
// as: the value in force, with where it comes from.
//
// Only a topic's explicitly set configs are stored in etcd. Every other
// config takes this broker's default (a flag, as Kafka's server.properties
// does), else the built-in one (TopicConfigDefs). A flag changed on restart
// therefore changes every topic that sets none, as in Kafka; brokers of one
// cluster are meant to run with the same flags.
//
// Invariant: min.insync.replicas describes as what the replica core
// enforces: never fewer than a majority of the topic's replicas
// (replica.Replica.minISR), whatever is set.

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/controller"
)

// TopicDefaults are a broker's defaults of topic configs that differ from
// the built-in ones, by config key. A nil map is the built-in defaults.
type TopicDefaults map[string]string

// TopicDefaults returns the topic config defaults cfg's flags set.
func (c Config) TopicDefaults() TopicDefaults {
	return TopicDefaults{
		CfgRetentionMs:       strconv.FormatInt(c.DefaultRetentionMs, 10),
		CfgMinInsyncReplicas: strconv.Itoa(c.DefaultMinInsyncReplicas),
	}
}

// value returns key's value for a topic with the explicit configs, and
// where it comes from: the topic, this broker's flags, or the built-in
// default.
func (d TopicDefaults) Value(configs map[string]string, key string) (string, kmsg.ConfigSource) {
	if v, ok := configs[key]; ok {
		return v, kmsg.ConfigSourceDynamicTopicConfig
	}
	builtin := TopicConfigDefs[key].def
	if v, ok := d[key]; ok && v != builtin {
		return v, kmsg.ConfigSourceStaticBrokerConfig
	}
	return builtin, kmsg.ConfigSourceDefaultConfig
}

// enforced is value with min.insync.replicas raised to the majority of
// replicationFactor replicas that the replica core requires anyway.
func (d TopicDefaults) Enforced(configs map[string]string, replicationFactor int16, key string) (string, kmsg.ConfigSource) {
	v, src := d.Value(configs, key)
	if key != CfgMinInsyncReplicas {
		return v, src
	}
	n, err := strconv.Atoi(v)
	if majority := int(replicationFactor)/2 + 1; err == nil && n < majority {
		return strconv.Itoa(majority), src
	}
	return v, src
}

// validateTopicDefaults checks the topic defaults of cfg as the topic
// configs they stand for are checked.
func (c Config) validateTopicDefaults() error {
	for key, v := range c.TopicDefaults() {
		if err := validateTopicConfig(key, v); err != nil {
			return fmt.Errorf("broker: default of topic config %s: %w", key, err)
		}
	}
	if c.DefaultReplicationFactor < 0 || c.DefaultReplicationFactor > maxReplicationFactor {
		return fmt.Errorf("broker: default replication factor %d is out of range [0, %d] (0: one replica per AZ, at most 3)", c.DefaultReplicationFactor, maxReplicationFactor)
	}
	if rf := c.DefaultReplicationFactor; rf > 0 && c.DefaultMinInsyncReplicas > rf {
		return fmt.Errorf("broker: default min.insync.replicas %d is above the default replication factor %d: every acks=all write would be refused", c.DefaultMinInsyncReplicas, rf)
	}
	return nil
}

// maxReplicationFactor bounds --default-replication-factor (a replication
// factor is an int16 on the wire).
const maxReplicationFactor = 32767

// defaultReplicationFactor is the replication factor of a new topic that
// asks for the default: the flag, or one replica per AZ of brokers, at most
// three (controller.DefaultReplicationFactor).
func (b *Node) DefaultReplicationFactor(brokers []controller.Broker) int {
	if b.Cfg.DefaultReplicationFactor > 0 {
		return b.Cfg.DefaultReplicationFactor
	}
	return controller.DefaultReplicationFactor(brokers)
}
