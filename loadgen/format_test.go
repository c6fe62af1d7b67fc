package loadgen

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

func sampleResult(samples int) *Result {
	cfg := DefaultConfig()
	cfg.Scenario = ScenarioPeak
	cfg = cfg.resolved(epoch)
	res := newResult(cfg, ConsumerAssign)
	res.Label = `sync <always> & "durable"` // must be escaped in SVG
	res.Produced = Throughput{Records: 30000, Bytes: 30000 * 1024, MsgsPerSec: 1000, MBPerSec: 1.024}
	res.Consumed = Throughput{Records: 30000, Bytes: 30000 * 1024, MsgsPerSec: 1000, MBPerSec: 1.024, Duplicates: 3}
	res.AckLatency = Summary{Count: 30000, P50Ms: 1.5, P95Ms: 3, P99Ms: 4.25, P999Ms: 9, MaxMs: 12}
	res.E2ELatency = Summary{Count: 30000, P50Ms: 2, P95Ms: 4, P99Ms: 5, P999Ms: 10, MaxMs: 15}
	res.Lag = LagResult{Max: 1200, CatchUpSeconds: 0.5, CaughtUp: true}
	res.Peak = &PeakResult{SteadyRate: 1000, PeakRate: 3000, PeakSeconds: 3, MaxBacklog: 4000, DrainSeconds: 2.5, Drained: true}
	res.Crash = &CrashResult{KilledAtSeconds: 3, Resumed: true, PauseSeconds: 6.2, Replayed: 4500}
	res.Errors = map[string]int64{"produce: NOT_LEADER_FOR_PARTITION": 2, "consume: timeout": 1}
	for i := 0; i < samples; i++ {
		res.Series = append(res.Series, Sample{T: float64(i + 1), Phase: "steady", SentPerSec: 1000, AckedPerSec: 990,
			ConsumedPerSec: 980, ProduceMBps: 1, ConsumeMBps: 1, AckP50Ms: 1, AckP99Ms: 4, E2EP99Ms: 5,
			Lag: int64(i * 10), Backlog: int64(i * 12), Errors: int64(i % 2)})
	}
	return res
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, sampleResult(3)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"kafka", "peak", "target 1000/s", "produced", "30000", "publish ack", "4.25", "end-to-end",
		"p99.9", "drain 2.50s", "pause 6.20s", "replayed 4500", "NOT_LEADER_FOR_PARTITION", "consumer lag",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteJSONRoundTrip(t *testing.T) {
	in := sampleResult(5)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, in); err != nil {
		t.Fatal(err)
	}
	var out Result
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.AckLatency != in.AckLatency || out.Peak.DrainSeconds != 2.5 || len(out.Series) != 5 ||
		out.Errors["consume: timeout"] != 1 {
		t.Fatalf("round trip lost data: %+v", out)
	}
	var raw map[string]any
	_ = json.Unmarshal(buf.Bytes(), &raw)
	for _, key := range []string{"ack_latency", "e2e_latency", "produced", "consumed", "lag", "series", "peak"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
}

func TestWriteCSV(t *testing.T) {
	for _, n := range []int{0, 1, 7} {
		var buf bytes.Buffer
		if err := WriteCSV(&buf, sampleResult(n)); err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(&buf).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != n+1 || strings.Join(rows[0], ",") != strings.Join(csvHeader, ",") {
			t.Fatalf("%d samples: %d rows, header %v", n, len(rows), rows[0])
		}
		for _, r := range rows {
			if len(r) != len(csvHeader) {
				t.Fatalf("row %v has %d fields", r, len(r))
			}
		}
	}
}

func TestWriteSVGWellFormed(t *testing.T) {
	for _, n := range []int{0, 1, 30} {
		var buf bytes.Buffer
		if err := WriteSVG(&buf, sampleResult(n)); err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(&buf)
		var root string
		polylines := 0
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%d samples: not well-formed XML: %v", n, err)
			}
			if se, ok := tok.(xml.StartElement); ok {
				if root == "" {
					root = se.Name.Local
				}
				if se.Name.Local == "polyline" {
					polylines++
				}
			}
		}
		if root != "svg" {
			t.Fatalf("root element %q", root)
		}
		if want := 8; n > 0 && polylines != want {
			t.Fatalf("%d samples: %d polylines, want %d", n, polylines, want)
		}
	}
}

func TestNiceCeil(t *testing.T) {
	tests := []struct{ in, want float64 }{{0, 1}, {0.5, 1}, {1, 1}, {1.1, 2}, {3, 5}, {7, 10}, {120, 200}, {5000, 5000}}
	for _, tt := range tests {
		if got := niceCeil(tt.in); got != tt.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
