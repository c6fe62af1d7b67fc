package broker

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"
)

// docMetric is one row of docs/metrics.md's table.
type docMetric struct {
	typ    string
	labels []string
}

// readMetricsDoc parses the rows | `name` | type | labels | meaning | of
// docs/metrics.md.
func readMetricsDoc(t *testing.T) (map[string]docMetric, string) {
	t.Helper()
	raw, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z_:][a-z0-9_:]*)` \\| ([a-z]+) \\| ([^|]*) \\| (.+) \\|$")
	out := map[string]docMetric{}
	for _, line := range strings.Split(string(raw), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.TrimSpace(l); l != "" && l != "—" {
				labels = append(labels, l)
			}
		}
		sort.Strings(labels)
		if _, dup := out[m[1]]; dup {
			t.Errorf("docs/metrics.md lists %s twice", m[1])
		}
		out[m[1]] = docMetric{typ: m[2], labels: labels}
	}
	return out, string(raw)
}

// scrapedFamilies reads the # TYPE lines and the label names of every
// sample of a /metrics body.
func scrapedFamilies(body string) map[string]docMetric {
	types := map[string]string{}
	labels := map[string]map[string]bool{}
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? `)
	labelName := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
			continue
		}
		m := sample.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[1]
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suf); ok && types[base] != "" {
				name = base
			}
		}
		if labels[name] == nil {
			labels[name] = map[string]bool{}
		}
		for _, l := range labelName.FindAllStringSubmatch(m[3], -1) {
			if l[1] != "le" && l[1] != "quantile" {
				labels[name][l[1]] = true
			}
		}
	}
	out := map[string]docMetric{}
	for name, typ := range types {
		var ls []string
		for l := range labels[name] {
			ls = append(ls, l)
		}
		sort.Strings(ls)
		out[name] = docMetric{typ: typ, labels: ls}
	}
	return out
}

// sourceMetricNames is every "sluice_…" string literal of the broker's
// non-test Go files: the names of metrics registered whether or not a
// scrape shows them yet (a vector with no series is not exported).
func sourceMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	lit := regexp.MustCompile(`"(sluice_[a-z0-9_]+)"`)
	out := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(src), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMetricsDocumented scrapes a real broker running the canary (so its
// canary topic, group, partitions and fetches are exported too) and checks
// that docs/metrics.md lists every metric family it exports with the same
// type and labels, every sluice_ metric named in the broker's source, and
// nothing else.
func TestMetricsDocumented(t *testing.T) {
	doc, docText := readMetricsDoc(t)
	if len(doc) < 50 {
		t.Fatalf("docs/metrics.md: %d rows parsed; the table's format changed?", len(doc))
	}
	cfg := testBrokerConfig(t)
	cfg.Canary, cfg.CanaryInterval = true, 100*time.Millisecond
	b := startBroker(t, cfg)
	scrape := func() string {
		resp, err := http.Get(httpBase(b) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	var body string
	// The canary's records reached their results: produce, fetch, group
	// and lag series all exist by then.
	brokertest.Eventually(t, 60*time.Second, "the canary's first results", func() bool {
		body = scrape()
		return strings.Contains(body, `sluice_group_lag_offsets{group="__sluice_canary.az1"`) &&
			!strings.Contains(body, `sluice_canary_latency_seconds_count{az="az1"} 0`)
	})

	scraped := scrapedFamilies(body)
	for _, prefix := range []string{"go_", "process_"} {
		if !strings.Contains(docText, "`"+prefix+"*`") {
			t.Errorf("docs/metrics.md does not mention the %s* metrics", prefix)
		}
	}
	for name, got := range scraped {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		want, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("docs/metrics.md does not list %s (%s, labels %v), which the broker exports", name, got.typ, got.labels)
		case want.typ != got.typ:
			t.Errorf("docs/metrics.md lists %s as a %s; the broker exports a %s", name, want.typ, got.typ)
		case !slices.Equal(want.labels, got.labels):
			t.Errorf("docs/metrics.md lists %s with labels %v; the broker exports %v", name, want.labels, got.labels)
		}
	}
	src := sourceMetricNames(t)
	for name := range src {
		if _, ok := doc[name]; !ok {
			t.Errorf("docs/metrics.md does not list %s, which the broker's source registers", name)
		}
	}
	for name := range doc {
		if _, ok := scraped[name]; !ok && !src[name] {
			t.Errorf("docs/metrics.md lists %s, which the broker neither exports nor names", name)
		}
	}
}

// TestDashboardNamesDocumentedMetrics checks that deploy/grafana/sluice.json
// is JSON and that every sluice_ metric its queries name is a row of
// docs/metrics.md (a histogram by its _bucket, _sum or _count series).
func TestDashboardNamesDocumentedMetrics(t *testing.T) {
	doc, _ := readMetricsDoc(t)
	raw, err := os.ReadFile("../deploy/grafana/sluice.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/sluice.json: %v", err)
	}
	name := regexp.MustCompile(`\bsluice_[a-z0-9_]+\b`)
	queries := 0
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			queries++
			names := name.FindAllString(q.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query names no sluice_ metric: %s", p.Title, q.Expr)
			}
			for _, n := range names {
				base := n
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(n, suf); ok && doc[b].typ == "histogram" {
						base = b
					}
				}
				if _, ok := doc[base]; !ok {
					t.Errorf("panel %q names %s, which docs/metrics.md does not list", p.Title, n)
				}
			}
		}
	}
	if queries < 20 {
		t.Fatalf("%d queries in the dashboard", queries)
	}
}
