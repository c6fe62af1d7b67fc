package e2e

// HTTP health endpoints and the Prometheus series an operator relies on.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseMetrics reads Prometheus text format into series keyed as
// name{label="value",...} with labels sorted by name.
func parseMetrics(t testing.TB, text string) map[string]float64 {
	t.Helper()
	out := make(map[string]float64)
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var name, labels, rest string
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				t.Fatalf("metrics line without closing brace: %q", line)
			}
			name, labels, rest = line[:i], line[i+1:j], strings.TrimSpace(line[j+1:])
		} else {
			f := strings.Fields(line)
			if len(f) < 2 {
				t.Fatalf("metrics line without value: %q", line)
			}
			name, rest = f[0], f[1]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			t.Fatalf("metrics line without value: %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			t.Fatalf("metrics line %q: value: %v", line, err)
		}
		out[seriesKey(name, labelPairs(labels)...)] = v
	}
	return out
}

func labelPairs(s string) []string {
	var kv []string
	for _, m := range labelRE.FindAllStringSubmatch(s, -1) {
		kv = append(kv, m[1], m[2])
	}
	return kv
}

// seriesKey renders name and label pairs (k1, v1, k2, v2, ...) canonically.
func seriesKey(name string, kv ...string) string {
	var ls []string
	for i := 0; i+1 < len(kv); i += 2 {
		ls = append(ls, fmt.Sprintf("%s=%q", kv[i], kv[i+1]))
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

func TestMetricsAndHealth(t *testing.T) {
	const (
		topic = "metrics-topic"
		count = 25
	)
	b := startBroker(t, brokerOptions{})
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, "http://"+b.httpAddr+path); code != http.StatusOK {
			t.Errorf("GET %s: %d %q, want 200", path, code, body)
		}
	}

	adm := newAdmin(t, b)
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	var recs []*kgo.Record
	for i := range count {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("metrics-%d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	consumeAll(t, b, topic, 1, count)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	hw, _ := ends.Lookup(topic, 0)

	code, text := httpGet(t, "http://"+b.httpAddr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	m := parseMetrics(t, text)
	checks := []struct {
		series string
		ok     func(float64) bool
		want   string
	}{
		{seriesKey("sluice_kafka_requests_total", "api", "Produce"), func(v float64) bool { return v >= 1 }, ">= 1"},
		{seriesKey("sluice_kafka_requests_total", "api", "Metadata"), func(v float64) bool { return v >= 1 }, ">= 1"},
		{seriesKey("sluice_kafka_requests_total", "api", "Fetch"), func(v float64) bool { return v >= 1 }, ">= 1"},
		{seriesKey("sluice_kafka_request_duration_seconds_count", "api", "Produce"), func(v float64) bool { return v >= 1 }, ">= 1"},
		{seriesKey("sluice_topic_bytes_in_total", "topic", topic), func(v float64) bool { return v > 0 }, "> 0"},
		{seriesKey("sluice_topic_records_in_total", "topic", topic), func(v float64) bool { return v >= count }, fmt.Sprintf(">= %d", count)},
		{seriesKey("sluice_topic_bytes_out_total", "topic", topic), func(v float64) bool { return v > 0 }, "> 0"},
		{seriesKey("sluice_partition_high_watermark", "partition", "0", "topic", topic), func(v float64) bool { return int64(v) == hw.Offset }, fmt.Sprintf("== %d (ListEndOffsets)", hw.Offset)},
		{seriesKey("sluice_partition_log_start_offset", "partition", "0", "topic", topic), func(v float64) bool { return v == 0 }, "== 0"},
	}
	for _, c := range checks {
		v, ok := m[c.series]
		switch {
		case !ok:
			t.Errorf("/metrics has no series %s", c.series)
		case !c.ok(v):
			t.Errorf("/metrics %s = %v, want %s", c.series, v, c.want)
		}
	}
	if t.Failed() {
		var names []string
		for k := range m {
			if strings.HasPrefix(k, "sluice_") {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		t.Logf("sluice_ series exposed:\n%s", strings.Join(names, "\n"))
	}
}
