package broker

// This file owns the topic configuration keys Sluice accepts, their defaults
// and their validation. Only explicitly set keys are stored in etcd; the
// effective value of every other key is its default here.
//
// Invariant: every validated value means what it means in Kafka; none is
// silently replaced by a default on its way to wal.Config (walConfig).

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/wal"
)

// configKind is how a topic config value is parsed and checked.
type configKind int

const (
	kindLong configKind = iota
	kindInt
	kindBool
	kindEnum
)

type configDef struct {
	kind    configKind
	def     string
	min     int64    // for kindLong and kindInt
	choices []string // for kindEnum
	doc     string
}

// Topic configuration keys. The tiering keys are accepted and validated now
// so that topics created today keep their settings when tiering arrives.
const (
	cfgRetentionMs       = "retention.ms"
	cfgRetentionBytes    = "retention.bytes"
	cfgSegmentBytes      = "segment.bytes"
	cfgSegmentMs         = "segment.ms"
	cfgMaxMessageBytes   = "max.message.bytes"
	cfgCleanupPolicy     = "cleanup.policy"
	cfgTimestampType     = "message.timestamp.type"
	cfgMinInsyncReplicas = "min.insync.replicas"
	cfgRemoteStorage     = "remote.storage.enable"
	cfgLocalRetentionMs  = "local.retention.ms"
	cfgLocalRetentionB   = "local.retention.bytes"
	cfgIndexInterval     = "index.interval.bytes"
	cfgUploadBytes       = "remote.upload.bytes"
	cfgUploadMaxDelayMs  = "remote.upload.max.delay.ms"
)

var topicConfigDefs = map[string]configDef{
	cfgRetentionMs:       {kind: kindLong, def: "86400000", min: -1, doc: "delete segments older than this; 0 deletes every sealed segment, -1 keeps them forever"},
	cfgRetentionBytes:    {kind: kindLong, def: "-1", min: -1, doc: "delete oldest segments while a partition is larger than this; 0 keeps only the active segment, -1 is unlimited"},
	cfgSegmentBytes:      {kind: kindInt, def: "67108864", min: 14, doc: "roll the active segment at this size"},
	cfgSegmentMs:         {kind: kindLong, def: "600000", min: 1, doc: "roll the active segment after this age"},
	cfgMaxMessageBytes:   {kind: kindInt, def: "1048588", min: 0, doc: "largest record batch accepted"},
	cfgCleanupPolicy:     {kind: kindEnum, def: "delete", choices: []string{"delete"}, doc: "only delete is supported; compaction is not"},
	cfgTimestampType:     {kind: kindEnum, def: "CreateTime", choices: []string{"CreateTime"}, doc: "record timestamps are the producer's"},
	cfgMinInsyncReplicas: {kind: kindInt, def: "1", min: 1, doc: "replicas that must hold a write before acks=all succeeds"},
	cfgRemoteStorage:     {kind: kindBool, def: "true", doc: "tier closed segments to object storage"},
	cfgLocalRetentionMs:  {kind: kindLong, def: "1800000", min: -2, doc: "keep uploaded segments locally this long; -2 follows retention.ms"},
	cfgLocalRetentionB:   {kind: kindLong, def: "-2", min: -2, doc: "keep at most this many uploaded bytes locally; -2 follows retention.bytes"},
	cfgIndexInterval:     {kind: kindInt, def: "4096", min: 0, doc: "bytes between offset index entries"},
	cfgUploadBytes:       {kind: kindLong, def: "67108864", min: 1, doc: "upload to object storage once this many committed bytes wait"},
	cfgUploadMaxDelayMs:  {kind: kindLong, def: "3600000", min: 0, doc: "upload committed bytes at the latest this long after the oldest began to wait"},
}

// topicConfigKeys returns the known keys in sorted order.
func topicConfigKeys() []string {
	keys := make([]string, 0, len(topicConfigDefs))
	for k := range topicConfigDefs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// errInvalidConfig marks a rejected topic config; it maps to INVALID_CONFIG.
type errInvalidConfig struct{ msg string }

func (e *errInvalidConfig) Error() string { return e.msg }

func invalidConfig(format string, args ...any) error {
	return &errInvalidConfig{msg: fmt.Sprintf(format, args...)}
}

// validateTopicConfig checks one key and value.
func validateTopicConfig(key, value string) error {
	def, ok := topicConfigDefs[key]
	if !ok {
		return invalidConfig("unknown topic config %q", key)
	}
	switch def.kind {
	case kindLong, kindInt:
		max := int64(math.MaxInt64)
		if def.kind == kindInt {
			max = math.MaxInt32
		}
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return invalidConfig("config %s: %q is not an integer", key, value)
		}
		if n < def.min || n > max {
			return invalidConfig("config %s: %d is out of range [%d, %d]", key, n, def.min, max)
		}
	case kindBool:
		if _, err := strconv.ParseBool(value); err != nil {
			return invalidConfig("config %s: %q is not true or false", key, value)
		}
	case kindEnum:
		for _, c := range def.choices {
			if value == c {
				return nil
			}
		}
		return invalidConfig("config %s: %q is not one of %v", key, value, def.choices)
	}
	return nil
}

// validateTopicConfigs checks a whole set of explicitly set configs.
func validateTopicConfigs(configs map[string]string) error {
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := validateTopicConfig(k, configs[k]); err != nil {
			return err
		}
	}
	return nil
}

// topicSettings are the effective, parsed configs of one topic.
type topicSettings struct {
	RetentionMs     int64
	RetentionBytes  int64
	SegmentBytes    int64
	SegmentMs       int64
	MaxMessageBytes int32
	IndexInterval   int32
	// MinInsyncReplicas is min.insync.replicas; the replica core never
	// commits on fewer than a majority of the replicas whatever it says.
	MinInsyncReplicas int
	// Tiering (tier/): remote.storage.enable, local.retention.*,
	// remote.upload.*.
	Tiered              bool
	LocalRetentionMs    int64
	LocalRetentionBytes int64
	UploadBytes         int64
	UploadMaxDelayMs    int64
}

// policy is the topic's retention policy for the retention state machine.
func (s topicSettings) policy(grace time.Duration) tier.Policy {
	return tier.Policy{Tiered: s.Tiered, RetentionMs: s.RetentionMs, RetentionBytes: s.RetentionBytes,
		LocalRetentionMs: s.LocalRetentionMs, LocalRetentionBytes: s.LocalRetentionBytes, Grace: grace}.Resolve()
}

// effectiveConfig returns the value of key: explicitly set, or the built-in
// default. What a topic describes as goes through topicDefaults, which also
// knows the broker's flags.
func effectiveConfig(configs map[string]string, key string) (value string, isDefault bool) {
	if v, ok := configs[key]; ok {
		return v, false
	}
	return topicConfigDefs[key].def, true
}

// parseSettings is parseSettingsWith the built-in defaults.
func parseSettings(configs map[string]string) topicSettings {
	return parseSettingsWith(configs, nil)
}

// parseSettingsWith parses a topic's effective settings: its explicit
// configs over the broker's defaults (topicdefaults.go).
func parseSettingsWith(configs map[string]string, defaults topicDefaults) topicSettings {
	num := func(key string) int64 {
		v, _ := defaults.value(configs, key)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil { // stored configs were validated; fall back to the default
			n, _ = strconv.ParseInt(topicConfigDefs[key].def, 10, 64)
		}
		return n
	}
	return topicSettings{
		RetentionMs:     num(cfgRetentionMs),
		RetentionBytes:  num(cfgRetentionBytes),
		SegmentBytes:    num(cfgSegmentBytes),
		SegmentMs:       num(cfgSegmentMs),
		MaxMessageBytes: int32(num(cfgMaxMessageBytes)),
		IndexInterval:   int32(num(cfgIndexInterval)),

		MinInsyncReplicas: int(num(cfgMinInsyncReplicas)),

		Tiered:              configBool(configs, cfgRemoteStorage),
		LocalRetentionMs:    num(cfgLocalRetentionMs),
		LocalRetentionBytes: num(cfgLocalRetentionB),
		UploadBytes:         num(cfgUploadBytes),
		UploadMaxDelayMs:    num(cfgUploadMaxDelayMs),
	}
}

// configBool is a validated boolean config's effective value.
func configBool(configs map[string]string, key string) bool {
	v, _ := effectiveConfig(configs, key)
	b, err := strconv.ParseBool(v)
	if err != nil {
		b, _ = strconv.ParseBool(topicConfigDefs[key].def)
	}
	return b
}

// walConfig turns topic settings into the wal's configuration, with the
// broker's page-cache tail. The wal only rolls segments: every deletion is
// the retention state machine's (tier/, topicSettings.policy).
func (b *Broker) walConfig(s topicSettings) wal.Config {
	return wal.Config{
		SegmentBytes:       s.SegmentBytes,
		SegmentAge:         millis(s.SegmentMs),
		IndexIntervalBytes: max(int(s.IndexInterval), 1),
		CacheTailBytes:     b.cfg.PageCacheTailBytes,
	}.WithDefaults()
}

// millis converts a non-negative count of milliseconds to a Duration,
// saturating instead of overflowing (the configs accept any int64).
func millis(ms int64) time.Duration {
	if ms > int64(math.MaxInt64/time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}
