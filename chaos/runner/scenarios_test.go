package runner

import (
	"slices"
	"testing"
)

// The six scenarios of `make chaos-short` (issue 11) exist, and every family
// has a fault the soak can draw.
func TestScenarioTable(t *testing.T) {
	names := Scenarios()
	for _, want := range []string{"leader-kill", "leader-pause", "leader-isolated", "all-crash", "s3-faults", "consumer-crash", soakName} {
		if !slices.Contains(names, want) {
			t.Errorf("scenario %q missing from %v", want, names)
		}
	}
	for name, sc := range families {
		if sc.fault == nil || sc.run == nil || sc.doc == "" {
			t.Errorf("family %q is incomplete", name)
		}
	}
	if _, ok := lookup("no-such-scenario"); ok {
		t.Error("lookup found a scenario that does not exist")
	}
}

// The soak draws only families its cluster can serve: without tmpfs data
// dirs, never disk-full.
func TestMixPoolFollowsTheCluster(t *testing.T) {
	all := needs{mesh: true, s3: true, s3faults: true, etcd: true, disk: true}
	noDisk := all
	noDisk.disk = false
	var withAll, withoutDisk []string
	for _, name := range familyNames() {
		if families[name].needs.within(all) {
			withAll = append(withAll, name)
		}
		if families[name].needs.within(noDisk) {
			withoutDisk = append(withoutDisk, name)
		}
	}
	if len(withAll) != len(families) {
		t.Errorf("the soak's full cluster serves %v, not every family", withAll)
	}
	if slices.Contains(withoutDisk, "disk-full") || len(withoutDisk) != len(families)-1 {
		t.Errorf("without tmpfs the pool is %v", withoutDisk)
	}
	if (needs{mesh: true}).within(needs{}) {
		t.Error("a family needing the mesh fits a cluster without one")
	}
}
