package runner

import (
	"os"
	"path/filepath"
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
