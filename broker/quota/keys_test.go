package quota

import (
	"math"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		key  string
		v    float64
		want string // "" = valid; else a substring of the error
	}{
		{ProducerByteRate, 1 << 20, ""},
		{ProducerByteRate, 0, "0 would refuse"},
		{ProducerByteRate, -1, "negative"},
		{ProducerByteRate, math.NaN(), "finite"},
		{ProducerByteRate, math.Inf(1), "finite"},
		{Topics, 0, ""},
		{Topics, 2.5, "whole number"},
		{InflightRequests, 0, "0 would refuse"},
		{RequestPercentage, 250, ""},
		{RequestPercentage, 1e9, "more than any broker"},
		{"producer_bytes_rate", 1, "unknown quota key"},
	}
	for _, c := range cases {
		err := Check(c.key, c.v)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Check(%s, %v) = %v, want valid", c.key, c.v, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Check(%s, %v) = %v, want an error containing %q", c.key, c.v, err, c.want)
		}
	}
}

func TestKeysAreTheIssuesList(t *testing.T) {
	want := "connection_creation_rate connections consumer_byte_rate controller_mutation_rate groups inflight_requests object_downloads object_storage_bytes object_upload_byte_rate partitions producer_byte_rate producer_record_rate request_percentage storage_bytes topics"
	if got := strings.Join(names(), " "); got != want {
		t.Errorf("keys = %s\nwant %s", got, want)
	}
	for _, k := range Keys() {
		if k.Help == "" || k.Unit == "" || k.Kind == 0 {
			t.Errorf("key %s is missing its help, unit or kind", k.Name)
		}
	}
}

func TestParseAndValidate(t *testing.T) {
	if v, err := Parse(ProducerByteRate, " 1e7 "); err != nil || v != 1e7 {
		t.Errorf("Parse = %v, %v", v, err)
	}
	if _, err := Parse(ProducerByteRate, "ten"); err == nil {
		t.Error("Parse of a word succeeded")
	}
	l := Limits{Topics: 3, "bogus": 1, ProducerByteRate: -5}
	err := l.Validate()
	if err == nil || !strings.Contains(err.Error(), "bogus") || !strings.Contains(err.Error(), "negative") {
		t.Errorf("Validate = %v, want both errors", err)
	}
}
