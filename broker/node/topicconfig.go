package node

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

// ConfigKind is how a topic config value is parsed and checked.
type ConfigKind int

const (
	KindLong ConfigKind = iota
	KindInt
	KindBool
	kindEnum
)

type configDef struct {
	Kind    ConfigKind
	def     string
	min     int64    // for KindLong and KindInt
	choices []string // for kindEnum
	Doc     string
	check   func(string) error // more checks, if set (topicconfig_delivery.go)
}

// Topic configuration keys. The tiering keys are accepted and validated now
// so that topics created today keep their settings when tiering arrives.
const (
	CfgRetentionMs       = "retention.ms"
	CfgRetentionBytes    = "retention.bytes"
	CfgSegmentBytes      = "segment.bytes"
	CfgSegmentMs         = "segment.ms"
	CfgMaxMessageBytes   = "max.message.bytes"
	CfgCleanupPolicy     = "cleanup.policy"
	CfgTimestampType     = "message.timestamp.type"
	CfgMinInsyncReplicas = "min.insync.replicas"
	cfgRemoteStorage     = "remote.storage.enable"
	CfgLocalRetentionMs  = "local.retention.ms"
	CfgLocalRetentionB   = "local.retention.bytes"
	CfgIndexInterval     = "index.interval.bytes"
	cfgUploadBytes       = "remote.upload.bytes"
	cfgUploadMaxDelayMs  = "remote.upload.max.delay.ms"
	CfgMaxInlineBytes    = "max.inline.bytes"
)

// DefaultMaxInlineBytes is max.inline.bytes's default (256 KiB).
const DefaultMaxInlineBytes = 262144

var TopicConfigDefs = map[string]configDef{
	CfgRetentionMs:       {Kind: KindLong, def: "86400000", min: -1, Doc: "delete segments older than this; 0 deletes every sealed segment, -1 keeps them forever"},
	CfgRetentionBytes:    {Kind: KindLong, def: "-1", min: -1, Doc: "delete oldest segments while a partition is larger than this; 0 keeps only the active segment, -1 is unlimited"},
	CfgSegmentBytes:      {Kind: KindInt, def: "67108864", min: 14, Doc: "roll the active segment at this size"},
	CfgSegmentMs:         {Kind: KindLong, def: "600000", min: 1, Doc: "roll the active segment after this age"},
	CfgMaxMessageBytes:   {Kind: KindInt, def: "1048588", min: 0, Doc: "largest record batch accepted"},
	CfgCleanupPolicy:     {Kind: kindEnum, def: "delete", choices: []string{"delete"}, Doc: "only delete is supported; compaction is not"},
	CfgTimestampType:     {Kind: kindEnum, def: "CreateTime", choices: []string{"CreateTime"}, Doc: "record timestamps are the producer's"},
	CfgMinInsyncReplicas: {Kind: KindInt, def: "1", min: 1, Doc: "replicas that must hold a write before acks=all succeeds"},
	cfgRemoteStorage:     {Kind: KindBool, def: "true", Doc: "tier closed segments to object storage"},
	CfgLocalRetentionMs:  {Kind: KindLong, def: "1800000", min: -2, Doc: "keep uploaded segments locally this long; -2 follows retention.ms"},
	CfgLocalRetentionB:   {Kind: KindLong, def: "-2", min: -2, Doc: "keep at most this many uploaded bytes locally; -2 follows retention.bytes"},
	CfgIndexInterval:     {Kind: KindInt, def: "4096", min: 0, Doc: "bytes between offset index entries"},
	cfgUploadBytes:       {Kind: KindLong, def: "67108864", min: 1, Doc: "upload to object storage once this many committed bytes wait"},
	cfgUploadMaxDelayMs:  {Kind: KindLong, def: "3600000", min: 0, Doc: "upload committed bytes at the latest this long after the oldest began to wait"},
	CfgMaxInlineBytes: {Kind: KindInt, def: "262144", min: 0, Doc: "largest payload (record value) accepted inline; " +
		"a larger payload is uploaded first (POST /v1/uploads) and published as an object reference"},
}

// TopicConfigKeys returns the known keys in sorted order.
func TopicConfigKeys() []string {
	keys := make([]string, 0, len(TopicConfigDefs))
	for k := range TopicConfigDefs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// errInvalidConfig marks a rejected topic config; it maps to INVALID_CONFIG.
type errInvalidConfig struct{ msg string }

func (e *errInvalidConfig) Error() string { return e.msg }

func InvalidConfig(format string, args ...any) error {
	return &errInvalidConfig{msg: fmt.Sprintf(format, args...)}
}

// validateTopicConfig checks one key and value.
func validateTopicConfig(key, value string) error {
	def, ok := TopicConfigDefs[key]
	if !ok {
		return InvalidConfig("unknown topic config %q", key)
	}
	if def.check != nil {
		if err := def.check(value); err != nil {
			return InvalidConfig("%v", err)
		}
	}
	switch def.Kind {
	case KindLong, KindInt:
		max := int64(math.MaxInt64)
		if def.Kind == KindInt {
			max = math.MaxInt32
		}
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return InvalidConfig("config %s: %q is not an integer", key, value)
		}
		if n < def.min || n > max {
			return InvalidConfig("config %s: %d is out of range [%d, %d]", key, n, def.min, max)
		}
	case KindBool:
		if _, err := strconv.ParseBool(value); err != nil {
			return InvalidConfig("config %s: %q is not true or false", key, value)
		}
	case kindEnum:
		for _, c := range def.choices {
			if value == c {
				return nil
			}
		}
		return InvalidConfig("config %s: %q is not one of %v", key, value, def.choices)
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

// TopicSettings are the effective, parsed configs of one topic.
type TopicSettings struct {
	RetentionMs     int64
	RetentionBytes  int64
	SegmentBytes    int64
	SegmentMs       int64
	MaxMessageBytes int32
	IndexInterval   int32
	// MaxInlineBytes is max.inline.bytes: the largest value (payload) one
	// produced record may carry inline (broker/envelope).
	MaxInlineBytes int32
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
func (s TopicSettings) Policy(grace time.Duration) tier.Policy {
	return tier.Policy{Tiered: s.Tiered, RetentionMs: s.RetentionMs, RetentionBytes: s.RetentionBytes,
		LocalRetentionMs: s.LocalRetentionMs, LocalRetentionBytes: s.LocalRetentionBytes, Grace: grace}.Resolve()
}

// effectiveConfig returns the value of key: explicitly set, or the built-in
// default. What a topic describes as goes through TopicDefaults, which also
// knows the broker's flags.
func effectiveConfig(configs map[string]string, key string) (value string, isDefault bool) {
	if v, ok := configs[key]; ok {
		return v, false
	}
	return TopicConfigDefs[key].def, true
}

// ParseSettings is parseSettingsWith the built-in defaults.
func ParseSettings(configs map[string]string) TopicSettings {
	return parseSettingsWith(configs, nil)
}

// parseSettingsWith parses a topic's effective settings: its explicit
// configs over the broker's defaults (topicdefaults.go).
func parseSettingsWith(configs map[string]string, defaults TopicDefaults) TopicSettings {
	num := func(key string) int64 {
		v, _ := defaults.Value(configs, key)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil { // stored configs were validated; fall back to the default
			n, _ = strconv.ParseInt(TopicConfigDefs[key].def, 10, 64)
		}
		return n
	}
	return TopicSettings{
		RetentionMs:     num(CfgRetentionMs),
		RetentionBytes:  num(CfgRetentionBytes),
		SegmentBytes:    num(CfgSegmentBytes),
		SegmentMs:       num(CfgSegmentMs),
		MaxMessageBytes: int32(num(CfgMaxMessageBytes)),
		IndexInterval:   int32(num(CfgIndexInterval)),
		MaxInlineBytes:  int32(num(CfgMaxInlineBytes)),

		MinInsyncReplicas: int(num(CfgMinInsyncReplicas)),

		Tiered:              configBool(configs, cfgRemoteStorage),
		LocalRetentionMs:    num(CfgLocalRetentionMs),
		LocalRetentionBytes: num(CfgLocalRetentionB),
		UploadBytes:         num(cfgUploadBytes),
		UploadMaxDelayMs:    num(cfgUploadMaxDelayMs),
	}
}

// configBool is a validated boolean config's effective value.
func configBool(configs map[string]string, key string) bool {
	v, _ := effectiveConfig(configs, key)
	b, err := strconv.ParseBool(v)
	if err != nil {
		b, _ = strconv.ParseBool(TopicConfigDefs[key].def)
	}
	return b
}

// walConfig turns topic settings into the wal's configuration, with the
// broker's page-cache tail. The wal only rolls segments: every deletion is
// the retention state machine's (tier/, TopicSettings.Policy).
func (b *Node) walConfig(s TopicSettings) wal.Config {
	return wal.Config{
		SegmentBytes:       s.SegmentBytes,
		SegmentAge:         millis(s.SegmentMs),
		IndexIntervalBytes: max(int(s.IndexInterval), 1),
		CacheTailBytes:     b.Cfg.PageCacheTailBytes,
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
