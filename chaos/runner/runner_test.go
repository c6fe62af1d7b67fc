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

// buildPlanted builds sluiced with a planted-bug build tag.
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

func TestPlantedBugIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a broken broker and runs a chaos scenario against three of it")
	}
	root := moduleRoot(t)
	bin := buildPlanted(t, root, "sluice_planted_bug")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Scenario: "followers-pause-leader-kill", Duration: 20 * time.Second, Seed: 3,
		Dir: t.TempDir(), Sluiced: bin, VersityGW: versityGW(t, root), Rate: 400, DrainTimeout: time.Minute})
	if err != nil {
		t.Logf("run incomplete: %v (history %s)", err, res.History)
	}
	t.Logf("%d acknowledged sends, faults %v, anomalies %v", res.Stats.SendsOK, res.Faults, res.Report.Counts)
	if res.Faults["followers-pause-leader-kill"] == 0 {
		t.Fatal("no fault was injected")
	}
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
	if testing.Short() {
		t.Skip("builds a broken broker and runs a chaos scenario against three of it")
	}
	root := moduleRoot(t)
	bin := buildPlanted(t, root, "sluice_planted_nosync")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Scenario: "all-crash", Duration: 20 * time.Second, Seed: 3,
		Dir: t.TempDir(), Sluiced: bin, VersityGW: versityGW(t, root), Rate: 400, DrainTimeout: time.Minute})
	if err != nil {
		// Such a broker may also leave a high watermark above every
		// replica's log, so the drain cannot finish; the history up to
		// there is still checked.
		t.Logf("run incomplete: %v (history %s)", err, res.History)
	}
	t.Logf("%d acknowledged sends, faults %v, anomalies %v", res.Stats.SendsOK, res.Faults, res.Report.Counts)
	if res.Faults["kill-all"] == 0 {
		t.Fatal("no crash was injected")
	}
	if res.Report.Counts[checker.LostWrite] == 0 {
		t.Fatalf("a broker whose journal never fsyncs passed the checker after crashes that lose unsynced writes: %v", res.Report.Counts)
	}
}
