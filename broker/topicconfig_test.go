package broker

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
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

// TestSettingsToWalRetention checks the retention.ms / retention.bytes →
// wal.Config mapping: 0 keeps nothing sealed, -1 is unlimited, and no value
// falls back to the wal's default (issue 7, item 13).
func TestSettingsToWalRetention(t *testing.T) {
	tests := []struct {
		name      string
		configs   map[string]string
		wantAge   time.Duration // exact, or for 0 any value in (0, 1ms)
		wantBytes int64         // exact, or for 0 any value in (0, smallest batch)
	}{
		{"defaults", nil, 24 * time.Hour, -1},
		{"ms=0", map[string]string{"retention.ms": "0"}, 0, -1},
		{"bytes=0", map[string]string{"retention.bytes": "0"}, 24 * time.Hour, 0},
		{"both 0", map[string]string{"retention.ms": "0", "retention.bytes": "0"}, 0, 0},
		{"unlimited", map[string]string{"retention.ms": "-1", "retention.bytes": "-1"}, -1, -1},
		{"explicit", map[string]string{"retention.ms": "1500", "retention.bytes": "4096"}, 1500 * time.Millisecond, 4096},
		{"huge ms", map[string]string{"retention.ms": "9223372036854775807", "segment.ms": "9223372036854775807"}, math.MaxInt64, -1},
	}
	const smallestBatch = 61 // a v2 batch header with no records
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := validateTopicConfigs(tt.configs); err != nil {
				t.Fatal(err)
			}
			cfg := parseSettings(tt.configs).walConfig()
			if err := cfg.Validate(); err != nil {
				t.Fatalf("wal config %+v: %v", cfg, err)
			}
			if tt.wantAge == 0 {
				if cfg.RetentionAge <= 0 || cfg.RetentionAge >= time.Millisecond {
					t.Errorf("retention.ms=0 gave RetentionAge %v, want in (0, 1ms)", cfg.RetentionAge)
				}
			} else if cfg.RetentionAge != tt.wantAge {
				t.Errorf("RetentionAge = %v, want %v", cfg.RetentionAge, tt.wantAge)
			}
			if tt.wantBytes == 0 {
				if cfg.RetentionBytes <= 0 || cfg.RetentionBytes >= smallestBatch {
					t.Errorf("retention.bytes=0 gave RetentionBytes %d, want in (0, %d)", cfg.RetentionBytes, smallestBatch)
				}
			} else if cfg.RetentionBytes != tt.wantBytes {
				t.Errorf("RetentionBytes = %d, want %d", cfg.RetentionBytes, tt.wantBytes)
			}
			// WithDefaults must not turn the mapped values back into defaults.
			if again := cfg.WithDefaults(); again.RetentionAge != cfg.RetentionAge || again.RetentionBytes != cfg.RetentionBytes {
				t.Errorf("WithDefaults changed retention: %+v → %+v", cfg, again)
			}
		})
	}
}
