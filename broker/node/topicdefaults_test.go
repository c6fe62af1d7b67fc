package node

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTopicDefaultsEnforced(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DefaultRetentionMs = 3600000
	d := cfg.TopicDefaults()
	const def, static, dynamic = kmsg.ConfigSourceDefaultConfig, kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigSourceDynamicTopicConfig
	tests := []struct {
		name    string
		d       TopicDefaults
		configs map[string]string
		rf      int16
		key     string
		value   string
		source  kmsg.ConfigSource
	}{
		{"built-in", nil, nil, 1, CfgRetentionMs, "86400000", def},
		{"flag", d, nil, 1, CfgRetentionMs, "3600000", static},
		{"flag at the built-in value", DefaultConfig().TopicDefaults(), nil, 1, CfgRetentionMs, "86400000", def},
		{"topic wins", d, map[string]string{CfgRetentionMs: "5"}, 1, CfgRetentionMs, "5", dynamic},
		{"one replica", d, nil, 1, CfgMinInsyncReplicas, "1", def},
		{"majority of three", d, nil, 3, CfgMinInsyncReplicas, "2", def},
		{"majority of five", d, nil, 5, CfgMinInsyncReplicas, "3", def},
		{"explicit below the majority", d, map[string]string{CfgMinInsyncReplicas: "1"}, 3, CfgMinInsyncReplicas, "2", dynamic},
		{"explicit above the majority", d, map[string]string{CfgMinInsyncReplicas: "3"}, 3, CfgMinInsyncReplicas, "3", dynamic},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, src := tc.d.Enforced(tc.configs, tc.rf, tc.key)
			if v != tc.value || src != tc.source {
				t.Fatalf("%s = %q (%v), want %q (%v)", tc.key, v, src, tc.value, tc.source)
			}
		})
	}
	if s := parseSettingsWith(nil, d); s.RetentionMs != 3600000 {
		t.Fatalf("settings with the flag: retention %d", s.RetentionMs)
	}
}

func TestTopicDefaultsValidate(t *testing.T) {
	tests := []struct {
		name   string
		adjust func(*Config)
		says   string
	}{
		{"retention below -1", func(c *Config) { c.DefaultRetentionMs = -2 }, "retention.ms"},
		{"min insync 0", func(c *Config) { c.DefaultMinInsyncReplicas = 0 }, "min.insync.replicas"},
		{"negative replication", func(c *Config) { c.DefaultReplicationFactor = -1 }, "replication factor"},
		{"min insync above replication", func(c *Config) { c.DefaultReplicationFactor, c.DefaultMinInsyncReplicas = 2, 3 }, "every acks=all write"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.adjust(&cfg)
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Validate = %v, want an error about %s", err, tc.says)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.DefaultReplicationFactor, cfg.DefaultMinInsyncReplicas, cfg.DefaultRetentionMs = 3, 2, -1
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
}
