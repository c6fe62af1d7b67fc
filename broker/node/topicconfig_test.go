package node

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/tier"
)

func TestValidateTopicConfig(t *testing.T) {
	tests := []struct {
		key, value string
		ok         bool
	}{
		{"retention.ms", "1000", true},
		{"retention.ms", "-1", true},
		{"retention.ms", "-2", false},
		{"retention.ms", "abc", false},
		{"segment.bytes", "13", false},
		{"segment.bytes", "1048576", true},
		{"segment.bytes", "4294967296", false},
		{"max.message.bytes", "1024", true},
		{"cleanup.policy", "delete", true},
		{"cleanup.policy", "compact", false},
		{"remote.storage.enable", "false", true},
		{"remote.storage.enable", "maybe", false},
		{"local.retention.ms", "-2", true},
		{"no.such.key", "1", false},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			err := validateTopicConfig(tt.key, tt.value)
			if (err == nil) != tt.ok {
				t.Fatalf("validateTopicConfig(%q, %q) = %v, want ok=%v", tt.key, tt.value, err, tt.ok)
			}
			var cfgErr *errInvalidConfig
			if err != nil && !errors.As(err, &cfgErr) {
				t.Fatalf("error %v is not an invalid-config error", err)
			}
		})
	}
}

func TestParseSettingsDefaults(t *testing.T) {
	s := ParseSettings(nil)
	if s.RetentionMs != 86400000 || s.SegmentBytes != 64<<20 || s.RetentionBytes != -1 {
		t.Fatalf("defaults = %+v", s)
	}
	s = ParseSettings(map[string]string{"retention.ms": "-1", "segment.ms": "100"})
	b := &Node{Cfg: DefaultConfig()}
	cfg := b.walConfig(s)
	if cfg.SegmentAge.Milliseconds() != 100 {
		t.Fatalf("segment age = %v, want 100ms", cfg.SegmentAge)
	}
	if cfg.CacheTailBytes != b.Cfg.PageCacheTailBytes || cfg.CacheTailBytes <= 0 {
		t.Fatalf("cache tail = %d, want the broker's %d", cfg.CacheTailBytes, b.Cfg.PageCacheTailBytes)
	}
}

func TestValidateTopicName(t *testing.T) {
	for _, name := range []string{"orders", "a.b_c-D9", strings.Repeat("x", 249)} {
		if err := ValidateTopicName(name); err != nil {
			t.Errorf("%q rejected: %v", name, err)
		}
	}
	for _, name := range []string{"", ".", "..", "bad/name", "sp ace", strings.Repeat("x", 250), "ünï"} {
		if err := ValidateTopicName(name); !errors.Is(err, errInvalidTopic) {
			t.Errorf("%q: got %v, want errInvalidTopic", name, err)
		}
	}
}

// TestSettingsToPolicy checks the retention configs → retention state
// machine mapping: Kafka's values pass unchanged (0 keeps nothing sealed, -1
// is unlimited), local.retention -2 follows the total, and the wal itself
// never deletes (issue 7, item 13; issue 10).
func TestSettingsToPolicy(t *testing.T) {
	tests := []struct {
		name    string
		configs map[string]string
		want    tier.Policy
	}{
		{"defaults", nil, tier.Policy{Tiered: true, RetentionMs: 86400000, RetentionBytes: -1, LocalRetentionMs: 1800000, LocalRetentionBytes: -1}},
		{"zeros", map[string]string{"retention.ms": "0", "retention.bytes": "0"}, tier.Policy{Tiered: true, RetentionMs: 0, RetentionBytes: 0, LocalRetentionMs: 1800000, LocalRetentionBytes: 0}},
		{"not tiered, unlimited", map[string]string{"remote.storage.enable": "false", "retention.ms": "-1"}, tier.Policy{RetentionMs: -1, RetentionBytes: -1, LocalRetentionMs: 1800000, LocalRetentionBytes: -1}},
		{"local follows total", map[string]string{"local.retention.ms": "-2", "retention.ms": "1500"}, tier.Policy{Tiered: true, RetentionMs: 1500, RetentionBytes: -1, LocalRetentionMs: 1500, LocalRetentionBytes: -1}},
		{"huge", map[string]string{"retention.ms": "9223372036854775807", "segment.ms": "9223372036854775807"}, tier.Policy{Tiered: true, RetentionMs: math.MaxInt64, RetentionBytes: -1, LocalRetentionMs: 1800000, LocalRetentionBytes: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := validateTopicConfigs(tt.configs); err != nil {
				t.Fatal(err)
			}
			s := ParseSettings(tt.configs)
			if got := s.Policy(0); got != tt.want {
				t.Errorf("policy = %+v, want %+v", got, tt.want)
			}
			cfg := (&Node{Cfg: DefaultConfig()}).walConfig(s)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("wal config %+v: %v", cfg, err)
			}
		})
	}
}
