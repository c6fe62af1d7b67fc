package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGrepLogFindsCanaryMismatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluiced.log")
	log := "=== chaos/cluster: start #1\nINF canary running az=a\nERR canary mismatch kind=lost id=a-1-2-3\n" +
		"=== chaos/cluster: start #2\nERR canary mismatch kind=skipped id=a-1-9-4\n"
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := grepLog(path, "canary mismatch")
	if err != nil || len(got) != 2 || got[0] != "ERR canary mismatch kind=lost id=a-1-2-3" {
		t.Fatalf("%q %v; want both runs' mismatch lines", got, err)
	}
	if _, err := grepLog(filepath.Join(t.TempDir(), "none"), "x"); err == nil {
		t.Fatal("a missing log read without error")
	}
}

// startLine is a run's first line in a broker's log (chaos/cluster).
func startLine(n int) string {
	return fmt.Sprintf("=== chaos/cluster: start #%d at 2026-12-03T11:00:00Z: bin/sluiced --canary\n", n)
}

// The canary's lines as a broker in a chaos cluster writes them
// (--log-format console, no colour).
const (
	logRunning  = "2026-12-03T11:00:01Z INF canary running az=a component=canary partitions=3 topic=__sluice_canary\n"
	logUp       = "2026-12-03T11:00:02Z INF canary available az=a component=canary\n"
	logCrashed  = "2026-12-03T11:00:10Z WRN canary unavailable az=a cause=\"the broker was not running\" component=canary since=2026-12-03T11:00:05Z\n"
	logCarried  = "2026-12-03T11:00:10Z INF canary outage carried over from an earlier run az=a cause=\"the broker was not running\" component=canary\n"
	logAgain    = "2026-12-03T11:00:12Z INF canary available again az=a component=canary outage_ms=7000\n"
	logRoundBad = "2026-12-03T11:00:20Z WRN canary unavailable az=a cause=\"a round was not acknowledged in full\" component=canary\n"
)

// TestCheckCanaryRestartReadsTheLastRun: a killed broker's run after its
// last restart must name the outage of its kill and then log "canary
// available again"; a recovery from an outage of the run's own (a failed
// round) does not count, nor does a report in an earlier run; a broker
// killed before its canary was ever available has nothing to report.
func TestCheckCanaryRestartReadsTheLastRun(t *testing.T) {
	cases := []struct {
		name          string
		log           string
		finding       string // a substring of the one finding; "" for none
		summary       string // a substring of the one summary line, when no finding
		upBefore      bool
		reported, rec bool
	}{
		{name: "reported and recovered", log: startLine(1) + logRunning + logUp + startLine(2) + logRunning + logCrashed + logAgain,
			summary: "reported and recovered after 7000 ms", upBefore: true, reported: true, rec: true},
		{name: "carried over two restarts", log: startLine(1) + logUp + startLine(2) + logCrashed + startLine(3) + logCarried + logAgain,
			summary: "(start #3) reported and recovered", upBefore: true, reported: true, rec: true},
		{name: "reported in an earlier run only", log: startLine(1) + logUp + startLine(2) + logCrashed + logAgain + startLine(3) + logRunning + logUp,
			finding: "did not report the outage of its kill", upBefore: true},
		{name: "not recovered", log: startLine(1) + logUp + startLine(2) + logCrashed,
			finding: "logged no \"canary available again\"", upBefore: true, reported: true},
		{name: "recovered from its own outage only", log: startLine(1) + logUp + startLine(2) + logCrashed + startLine(3) + logUp + logRoundBad + logAgain,
			finding: "did not report", upBefore: true},
		{name: "never available before", log: startLine(1) + logRunning + startLine(2) + logRunning + logUp,
			summary: "killed before it was ever available"},
		{name: "no restart", log: startLine(1) + logRunning + logUp, finding: "no restart"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sluiced.log")
			if err := os.WriteFile(path, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := readCanaryRestart(path)
			if err != nil {
				t.Fatal(err)
			}
			if r.upBefore != tc.upBefore || (r.reported != "") != tc.reported || (r.recovered != "") != tc.rec {
				t.Fatalf("read %+v; want upBefore %v, reported %v, recovered %v", r, tc.upBefore, tc.reported, tc.rec)
			}
			findings, summary := checkCanaryRestart(1, "a", path)
			if tc.finding != "" {
				if len(findings) != 1 || !strings.Contains(findings[0], tc.finding) || len(summary) != 0 {
					t.Fatalf("findings %q, summary %q; want one finding with %q", findings, summary, tc.finding)
				}
				return
			}
			if len(findings) != 0 || len(summary) != 1 || !strings.Contains(summary[0], tc.summary) {
				t.Fatalf("findings %q, summary %q; want no finding and a summary with %q", findings, summary, tc.summary)
			}
		})
	}
	findings, _ := checkCanaryRestart(1, "a", filepath.Join(t.TempDir(), "none"))
	if len(findings) != 1 || !strings.Contains(findings[0], "read its log") {
		t.Fatalf("a missing log: %q, want one finding", findings)
	}
}

func TestLogFieldReadsBothFormats(t *testing.T) {
	for line, want := range map[string]string{
		logAgain: "7000",
		`{"level":"info","az":"a","outage_ms":2500.5,"message":"canary available again"}`: "2500.5",
		`{"level":"info","message":"canary available again","outage_ms":12}`:              "12",
		logUp: "",
	} {
		if got := logField(line, "outage_ms"); got != want {
			t.Errorf("logField(%q) = %q, want %q", line, got, want)
		}
	}
}
