package runner

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/chaos/history"
)

// The six scenarios of `make chaos-short` (issue 11) exist, and every family
// has a fault the soak can draw.
func TestScenarioTable(t *testing.T) {
	names := Scenarios()
	for _, want := range []string{"leader-kill", "leader-pause", "leader-isolated", "all-crash", "s3-faults", "consumer-crash", "disk-loss", "lagging-follower", soakName} {
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
	all := needs{mesh: true, s3: true, s3faults: true, etcd: true, disk: true, tenants: true}
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
	if (needs{tenants: true}).within(needs{}) {
		t.Error("a family needing tenants fits a cluster without security")
	}
}

// Two replicas of the side topic that hold different records at one offset
// are reported; replicas that only start or end at other offsets are not.
func TestFirstDifference(t *testing.T) {
	entry := func(o int64, v string) history.ReplicaEntry {
		return history.ReplicaEntry{Offset: history.Offset(o), Digest: history.Digest(nil, []byte(v))}
	}
	a := history.ReplicaLog{Broker: 1, Entries: []history.ReplicaEntry{entry(5, "a"), entry(6, "b"), entry(7, "c")}}
	later := history.ReplicaLog{Broker: 2, Entries: []history.ReplicaEntry{entry(7, "c"), entry(8, "d")}}
	if got := firstDifference(a, later); got != "" {
		t.Errorf("overlapping logs that agree: %q", got)
	}
	other := history.ReplicaLog{Broker: 3, Entries: []history.ReplicaEntry{entry(6, "x")}}
	if got := firstDifference(a, other); !strings.Contains(got, "offset 6") {
		t.Errorf("logs differing at 6: %q", got)
	}
}
