package broker

import (
	"errors"
	"strings"
	"testing"
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
	s := parseSettings(nil)
	if s.RetentionMs != 86400000 || s.SegmentBytes != 64<<20 || s.RetentionBytes != -1 {
		t.Fatalf("defaults = %+v", s)
	}
	s = parseSettings(map[string]string{"retention.ms": "-1", "segment.ms": "100"})
	cfg := s.walConfig()
	if cfg.RetentionAge >= 0 {
		t.Fatalf("retention.ms=-1 must mean unlimited, got %v", cfg.RetentionAge)
	}
	if cfg.SegmentAge.Milliseconds() != 100 {
		t.Fatalf("segment age = %v, want 100ms", cfg.SegmentAge)
	}
}

func TestValidateTopicName(t *testing.T) {
	for _, name := range []string{"orders", "a.b_c-D9", strings.Repeat("x", 249)} {
		if err := validateTopicName(name); err != nil {
			t.Errorf("%q rejected: %v", name, err)
		}
	}
	for _, name := range []string{"", ".", "..", "bad/name", "sp ace", strings.Repeat("x", 250), "ünï"} {
		if err := validateTopicName(name); !errors.Is(err, errInvalidTopic) {
			t.Errorf("%q: got %v, want errInvalidTopic", name, err)
		}
	}
}
