package kafka

// DescribeConfigs (key 32), AlterConfigs (key 33) and
// IncrementalAlterConfigs (key 44) for topic configs. Broker configs are
// static (flags and the config file): a named broker describes its settings
// under Kafka's names (brokerConfigEntries), read-only; the cluster-wide
// default resource (empty name) describes as Kafka's dynamic defaults, which
// Sluice has none of; nothing broker-level can be altered over the protocol.

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/controller"
	"github.com/sluice-mq/sluice/broker/node"
)

func handleDescribeConfigs(b *Server, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DescribeConfigsRequest)
	resp := newResponse(req).(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := b.LookupTopic(rr.ResourceName)
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			sr.Configs = node.DescribeTopicConfigs(t.Meta.Configs, t.Meta.ReplicationFactor, b.Cfg.TopicDefaults(), rr.ConfigNames, r.IncludeDocumentation)
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.Cfg.NodeID)) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				sr.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("this is broker %d", b.Cfg.NodeID))
				break
			}
			if rr.ResourceType == kmsg.ConfigResourceTypeBroker && rr.ResourceName != "" {
				auto := controller.DefaultReplicationFactor(b.PlacementBrokers())
				sr.Configs = describeBrokerConfigs(brokerConfigEntries(b.Cfg, auto), rr.ConfigNames, r.IncludeSynonyms, r.IncludeDocumentation)
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			sr.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("resource type %d is not supported", rr.ResourceType))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return done(resp), nil
}

// brokerConfigEntry is one broker setting under its Kafka name.
type brokerConfigEntry struct {
	name  string
	value string // effective
	def   string // what node.DefaultConfig (or the topic default) gives
	typ   kmsg.ConfigType
	doc   string
}

// topicDefaultsAtBroker names the broker-level Kafka config whose value is
// the default of each topic config: the broker's flag where it has one
// (node.Config.topicDefaults), else the built-in default.
var topicDefaultsAtBroker = map[string]string{
	node.CfgRetentionMs:       "log.retention.ms",
	node.CfgRetentionBytes:    "log.retention.bytes",
	node.CfgSegmentBytes:      "log.segment.bytes",
	node.CfgSegmentMs:         "log.roll.ms",
	node.CfgMaxMessageBytes:   "message.max.bytes",
	node.CfgCleanupPolicy:     "log.cleanup.Policy",
	node.CfgTimestampType:     "log.message.timestamp.type",
	node.CfgMinInsyncReplicas: "min.insync.replicas",
	node.CfgLocalRetentionMs:  "log.local.retention.ms",
	node.CfgLocalRetentionB:   "log.local.retention.bytes",
	node.CfgIndexInterval:     "log.index.interval.bytes",
}

// brokerConfigEntries lists the settings of cfg that Kafka has a broker
// config for, sorted by name. A value equal to node.DefaultConfig's describes as
// a default: a flag set to its default value cannot be told apart.
// autoReplication is the replication factor a new topic gets without
// --default-replication-factor (one per AZ of the live brokers, at most 3).
func brokerConfigEntries(cfg node.Config, autoReplication int) []brokerConfigEntry {
	d := node.DefaultConfig()
	num := func(n int64) string { return strconv.FormatInt(n, 10) }
	replication := func(c node.Config) string {
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
	out := []brokerConfigEntry{
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
		def := node.TopicConfigDefs[topicKey]
		value, _ := cfg.TopicDefaults().Value(nil, topicKey)
		builtin, _ := d.TopicDefaults().Value(nil, topicKey)
		doc := "default of topic config " + topicKey + ": " + def.Doc
		if topicKey == node.CfgMinInsyncReplicas {
			doc += "; never fewer than a majority of a partition's replicas"
		}
		out = append(out, brokerConfigEntry{name, value, builtin, node.TopicConfigType(def.Kind), doc})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// describeBrokerConfigs answers DescribeConfigs for this broker: every entry,
// or those named. All are static: read-only, and either a default or a
// static broker config (flags or the config file).
func describeBrokerConfigs(entries []brokerConfigEntry, names []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	want := node.NameFilter(names)
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

// handleAlterConfigs replaces the whole set of a topic's explicit configs.
func handleAlterConfigs(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.AlterConfigsRequest)
	resp := newResponse(req).(*kmsg.AlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		err := checkAlterResource(rr.ResourceType)
		if err == nil {
			err = b.AlterTopicConfigs(ctx, rr.ResourceName, r.ValidateOnly, func(configs map[string]string) error {
				clear(configs)
				for _, c := range rr.Configs {
					if c.Value == nil {
						continue // a null value leaves the key at its default
					}
					configs[c.Name] = *c.Value
				}
				return nil
			})
		}
		sr.ErrorCode, sr.ErrorMessage = errorAndMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return done(resp), nil
}

// handleIncrementalAlterConfigs sets, deletes, appends to or subtracts from
// single keys.
func handleIncrementalAlterConfigs(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := newResponse(req).(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		err := checkAlterResource(rr.ResourceType)
		if err == nil {
			err = b.AlterTopicConfigs(ctx, rr.ResourceName, r.ValidateOnly, func(configs map[string]string) error {
				for _, c := range rr.Configs {
					switch c.Op {
					case kmsg.IncrementalAlterConfigOpSet:
						if c.Value == nil {
							return node.InvalidConfig("config %s: null value", c.Name)
						}
						configs[c.Name] = *c.Value
					case kmsg.IncrementalAlterConfigOpDelete:
						if _, ok := node.TopicConfigDefs[c.Name]; !ok {
							return node.InvalidConfig("unknown topic config %q", c.Name)
						}
						delete(configs, c.Name)
					default:
						return node.InvalidConfig("config %s: operation %v applies only to list configs", c.Name, c.Op)
					}
				}
				return nil
			})
		}
		sr.ErrorCode, sr.ErrorMessage = errorAndMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return done(resp), nil
}

func checkAlterResource(t kmsg.ConfigResourceType) error {
	if t == kmsg.ConfigResourceTypeTopic {
		return nil
	}
	return fmt.Errorf("%w: only topic configs can be altered; broker configs are static", node.ErrInvalidRequest)
}

func errorAndMessage(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	return node.ErrorCode(err), kmsg.StringPtr(err.Error())
}
