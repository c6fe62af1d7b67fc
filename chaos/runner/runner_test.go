package runner

// The suite is shown to catch a broken broker: one built with the tag
// sluice_planted_bug answers acks=all once the leader alone holds a batch
// (broker/partition/plantedbug_on.go). With the followers paused and the
// leader killed, acknowledged records are lost, and the checker must say
// so. The same scenario on a real build finds nothing (docs/chaos.md).

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/chaos/checker"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal(errors.New("no go.mod above the working directory"))
		}
		dir = parent
	}
}

func versityGW(t *testing.T, root string) string {
	t.Helper()
	for _, p := range []string{os.Getenv("SLUICE_VERSITYGW"), filepath.Join(root, "bin", "versitygw"), "versitygw"} {
		if p == "" {
			continue
		}
		if found, err := exec.LookPath(p); err == nil {
			return found
		}
	}
	t.Fatal("versitygw not found in $SLUICE_VERSITYGW, bin/ or $PATH; run `make tools`")
	return ""
}

// buildPlanted builds sluiced with a planted-bug build tag ("": none).
func buildPlanted(t *testing.T, root, tag string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluiced-"+tag)
	build := exec.Command("go", "build", "-tags", tag, "-o", bin, "./cmd/sluiced")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", tag, err, out)
	}
	return bin
}

// runPlanted runs scenario for 20 s against three brokers built with tag
// and returns the result after checking that fault was injected. A broken
// broker may leave its high watermark above every replica's log, so that
// the drain cannot finish; the history up to there is still checked.
func runPlanted(t *testing.T, tag, scenario, fault string) Result {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a broken broker and runs a chaos scenario against three of it")
	}
	root := moduleRoot(t)
	bin := buildPlanted(t, root, tag)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	res, err := Run(ctx, Config{Scenario: scenario, Duration: 20 * time.Second, Seed: 3,
		Dir: dir, Sluiced: bin, VersityGW: versityGW(t, root), Rate: 400, DrainTimeout: time.Minute})
	if err != nil {
		t.Logf("run incomplete: %v (history %s)", err, res.History)
	}
	t.Logf("%d acknowledged sends, faults %v, anomalies %v", res.Stats.SendsOK, res.Faults, res.Report.Counts)
	if res.Faults[fault] == 0 {
		logTails(t, dir)
		t.Fatalf("no %s fault was injected", fault)
	}
	return res
}

// logTails logs the last lines of the brokers' and etcd's logs in a run's
// directory, which the test's cleanup removes: a run that could not start
// its workload says why only there.
func logTails(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "n*", "sluiced.log"))
	logs = append(logs, filepath.Join(dir, "etcd", "etcd.log"))
	for _, p := range logs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Logf("%s: %v", p, err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		t.Logf("last lines of %s:\n%s", p, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

func TestPlantedBugIsCaught(t *testing.T) {
	res := runPlanted(t, "sluice_planted_bug", "followers-pause-leader-kill", "followers-pause-leader-kill")
	if res.Report.Counts[checker.LostWrite] == 0 {
		t.Fatalf("a broker that acknowledges before the quorum holds a batch passed the checker: %v", res.Report.Counts)
	}
}

// A broker whose journal never fsyncs acknowledges batches that only the
// page cache holds. A plain kill -9 keeps the page cache, so only a crash
// that loses unsynced writes (every chaos broker runs with
// --crash-loses-unsynced) can show it: all three brokers crashed at once
// lose the acknowledged tail of every partition.
func TestPlantedNoSyncIsCaught(t *testing.T) {
	res := runPlanted(t, "sluice_planted_nosync", "all-crash", "kill-all")
	if res.Report.Counts[checker.LostWrite] == 0 {
		t.Fatalf("a broker whose journal never fsyncs passed the checker after crashes that lose unsynced writes: %v", res.Report.Counts)
	}
}

// A leader that is also the controller, cut off from the other brokers but
// not from etcd, hears no complaint about itself; it must step aside as
// controller so that a broker its followers reach elects a new leader
// (broker/isolation.go). Before that fix its partition stayed leaderless
// for as long as the cut lasted.
func TestIsolatedControllerLeaderIsReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a chaos scenario against a real three-broker cluster")
	}
	root := moduleRoot(t)
	sluiced := buildPlanted(t, root, "") // a real build of this tree
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Scenario: "controller-isolated", Duration: 20 * time.Second, Seed: 5,
		Dir: t.TempDir(), Sluiced: sluiced, VersityGW: versityGW(t, root), Rate: 400})
	if err != nil {
		t.Fatalf("run: %v (history %s)", err, res.History)
	}
	n := res.Faults["isolate-controller-leader"]
	t.Logf("%d isolations, new leaders after %v, %d acknowledged sends, anomalies %v", n, res.Recoveries, res.Stats.SendsOK, res.Report.Counts)
	if n == 0 {
		t.Fatal("the controller led no partition at any tick: nothing was tested")
	}
	if len(res.Recoveries) != n {
		t.Fatalf("%d isolations of the controller-leader, %d new leaders within a minute", n, len(res.Recoveries))
	}
	if !res.OK() {
		t.Fatalf("anomalies: %v; unexpected exits: %v", res.Report.Counts, res.UnexpectedExits)
	}
}
