package node

// This file owns the broker's settings as DescribeConfigs describes a broker
// resource: each under its Kafka name, with its built-in default, Kafka's
// config type and a line of documentation. Package kafka answers the request
// with them; the values come from Config, which this package owns.
//
// Invariant: every broker entry is read-only and static (flags or the config
// file): it describes as a default when its value equals DefaultConfig's,
// else as a static broker config.

import (
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerConfigEntry is one broker setting under its Kafka name.
type BrokerConfigEntry struct {
	name  string
	value string // effective
	def   string // what DefaultConfig (or the topic default) gives
	typ   kmsg.ConfigType
	doc   string
}

// topicDefaultsAtBroker names the broker-level Kafka config whose value is
// the default of each topic config: the broker's flag where it has one
// (Config.TopicDefaults), else the built-in default.
var topicDefaultsAtBroker = map[string]string{
	CfgRetentionMs:       "log.retention.ms",
	CfgRetentionBytes:    "log.retention.bytes",
	CfgSegmentBytes:      "log.segment.bytes",
	CfgSegmentMs:         "log.roll.ms",
	CfgMaxMessageBytes:   "message.max.bytes",
	CfgCleanupPolicy:     "log.cleanup.policy",
	CfgTimestampType:     "log.message.timestamp.type",
	CfgMinInsyncReplicas: "min.insync.replicas",
	CfgLocalRetentionMs:  "log.local.retention.ms",
	CfgLocalRetentionB:   "log.local.retention.bytes",
	CfgIndexInterval:     "log.index.interval.bytes",
}

// BrokerConfigEntries lists the settings of cfg that Kafka has a broker
// config for, sorted by name. A value equal to DefaultConfig's describes as
// a default: a flag set to its default value cannot be told apart.
// autoReplication is the replication factor a new topic gets without
// --default-replication-factor (one per AZ of the live brokers, at most 3).
func BrokerConfigEntries(cfg Config, autoReplication int) []BrokerConfigEntry {
	d := DefaultConfig()
	num := func(n int64) string { return strconv.FormatInt(n, 10) }
	replication := func(c Config) string {
		if c.DefaultReplicationFactor > 0 {
			return num(int64(c.DefaultReplicationFactor))
		}
		return num(int64(autoReplication))
	}
	ms := func(x time.Duration) string { return num(x.Milliseconds()) }
	perIP := func(n int) string { // Sluice's 0 is no bound; Kafka's 0 admits no one
		if n == 0 {
			return num(math.MaxInt32)
		}
		return num(int64(n))
	}
	out := []BrokerConfigEntry{
		{"broker.id", num(int64(cfg.NodeID)), num(int64(d.NodeID)), kmsg.ConfigTypeInt, "this broker's node id"},
		{"broker.rack", cfg.AZ, d.AZ, kmsg.ConfigTypeString, "the availability zone of this broker"},
		{"auto.create.topics.enable", strconv.FormatBool(cfg.AutoCreateTopics), strconv.FormatBool(d.AutoCreateTopics), kmsg.ConfigTypeBoolean, "create a topic when a client asks for its metadata"},
		{"num.partitions", num(int64(cfg.DefaultPartitions)), num(int64(d.DefaultPartitions)), kmsg.ConfigTypeInt, "partitions of an automatically created topic"},
		{"default.replication.factor", replication(cfg), replication(d), kmsg.ConfigTypeInt, "replicas of a topic created without a replication factor (by default one per AZ of the live brokers, at most 3)"},
		{"socket.request.max.bytes", num(int64(cfg.MaxRequestBytes)), num(int64(d.MaxRequestBytes)), kmsg.ConfigTypeInt, "largest request frame accepted"},
		{"queued.max.request.bytes", num(cfg.QueuedMaxRequestBytes), num(d.QueuedMaxRequestBytes), kmsg.ConfigTypeLong, "request bytes held at once over all connections"},
		{"fetch.max.bytes", num(int64(cfg.FetchMaxBytes)), num(int64(d.FetchMaxBytes)), kmsg.ConfigTypeInt, "largest fetch response"},
		{"max.connections", num(int64(cfg.MaxConnections)), num(int64(d.MaxConnections)), kmsg.ConfigTypeInt, "open Kafka connections"},
		{"max.connections.per.ip", perIP(cfg.MaxConnectionsPerIP), perIP(d.MaxConnectionsPerIP), kmsg.ConfigTypeInt, "open Kafka connections from one client IP"},
		{"connections.max.idle.ms", ms(cfg.ConnectionsMaxIdle), ms(d.ConnectionsMaxIdle), kmsg.ConfigTypeLong, "close a connection idle this long"},
		{"log.retention.check.interval.ms", ms(cfg.RetentionCheckInterval), ms(d.RetentionCheckInterval), kmsg.ConfigTypeLong, "how often partitions roll aged segments and apply retention"},
		{"producer.id.expiration.ms", ms(cfg.ProducerIDExpiration), ms(d.ProducerIDExpiration), kmsg.ConfigTypeInt, "how long an idle idempotent producer's state is kept"},
		{"group.min.session.timeout.ms", ms(cfg.Coordinator.MinSessionTimeout), ms(d.Coordinator.MinSessionTimeout), kmsg.ConfigTypeInt, "smallest session timeout a group member may ask for"},
		{"group.max.session.timeout.ms", ms(cfg.Coordinator.MaxSessionTimeout), ms(d.Coordinator.MaxSessionTimeout), kmsg.ConfigTypeInt, "largest session timeout a group member may ask for"},
		{"offsets.retention.minutes", num(int64(cfg.Coordinator.OffsetsRetention / time.Minute)), num(int64(d.Coordinator.OffsetsRetention / time.Minute)), kmsg.ConfigTypeInt, "how long committed offsets outlive a group's last member"},
		{"offsets.retention.check.interval.ms", ms(cfg.Coordinator.RetentionCheckInterval), ms(d.Coordinator.RetentionCheckInterval), kmsg.ConfigTypeLong, "how often expired offsets and empty groups are removed"},
	}
	for topicKey, name := range topicDefaultsAtBroker {
		def := TopicConfigDefs[topicKey]
		value, _ := cfg.TopicDefaults().Value(nil, topicKey)
		builtin, _ := d.TopicDefaults().Value(nil, topicKey)
		doc := "default of topic config " + topicKey + ": " + def.Doc
		if topicKey == CfgMinInsyncReplicas {
			doc += "; never fewer than a majority of a partition's replicas"
		}
		out = append(out, BrokerConfigEntry{name, value, builtin, TopicConfigType(def.Kind), doc})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// DescribeBrokerConfigs answers DescribeConfigs for this broker: every entry,
// or those named. All are static: read-only, and either a default or a
// static broker config (flags or the config file).
func DescribeBrokerConfigs(entries []BrokerConfigEntry, names []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	want := NameFilter(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, e := range entries {
		if !want(e.name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.ReadOnly, c.ConfigType = e.name, kmsg.StringPtr(e.value), true, e.typ
		c.IsDefault = e.value == e.def
		c.Source = kmsg.ConfigSourceStaticBrokerConfig
		if c.IsDefault {
			c.Source = kmsg.ConfigSourceDefaultConfig
		}
		if synonyms { // in order of precedence, as Kafka lists them
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = e.name, c.Value, c.Source
			c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
			if !c.IsDefault {
				syn.Value, syn.Source = kmsg.StringPtr(e.def), kmsg.ConfigSourceDefaultConfig
				c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
			}
		}
		if docs {
			c.Documentation = kmsg.StringPtr(e.doc)
		}
		out = append(out, c)
	}
	return out
}
