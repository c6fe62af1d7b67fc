package e2e

// This file owns the tests of sluicectl's operator commands against a real
// three-broker cluster (the harness of cluster_test.go): `broker drain N`
// must leave broker N leading no partition and coordinating no group, in
// every broker's view, and say what it moved; `leader elect --preferred`
// must give each partition back to its preferred (first) replica. The
// commands run as the built binary, as an operator runs them.
//
// Invariant: every assertion is on the cluster (Metadata and
// FindCoordinator asked of each broker) or on what sluicectl printed; none
// trusts sluicectl's own claim.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// projectBinary is cmd/<name> as a binary: beside SLUICE_E2E_SLUICED when
// it is there, built into a temporary directory otherwise.
func projectBinary(t *testing.T, name string) string {
	t.Helper()
	if p := os.Getenv("SLUICE_E2E_SLUICED"); p != "" {
		if abs, err := filepath.Abs(filepath.Join(filepath.Dir(p), name)); err == nil && isFile(abs) {
			return abs
		}
	}
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	return bin
}

// ctlRun is one run of the sluicectl binary.
type ctlRun struct {
	code           int
	stdout, stderr string
}

// sluicectl runs the binary against the HTTP API of broker via.
func (c *cluster) sluicectl(bin string, via int32, args ...string) ctlRun {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--server", "http://" + c.node(via).httpAddr}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			c.t.Fatalf("sluicectl %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	c.t.Logf("sluicectl %s: exit %d\nstdout:\n%sstderr:\n%s", strings.Join(args, " "), code, out.String(), errb.String())
	return ctlRun{code, out.String(), errb.String()}
}

// leadersIn is partition → leader of topic in broker id's Metadata, and
// partition → preferred (first) replica.
func (c *cluster) leadersIn(id int32, topic string) (leaders, preferred map[int32]int32, err error) {
	md, err := c.metadata(id)
	if err != nil {
		return nil, nil, err
	}
	leaders, preferred = map[int32]int32{}, map[int32]int32{}
	for _, mt := range md.Topics {
		if mt.Topic == nil || *mt.Topic != topic {
			continue
		}
		for _, mp := range mt.Partitions {
			leaders[mp.Partition] = mp.Leader
			if len(mp.Replicas) > 0 {
				preferred[mp.Partition] = mp.Replicas[0]
			}
		}
	}
	return leaders, preferred, nil
}

// waitPreferred waits until every broker sees each of topic's partitions
// led by its preferred replica.
func (c *cluster) waitPreferred(topic string, partitions int, within time.Duration, what string) {
	c.t.Helper()
	eventually(c.t, within, what, func() (bool, string) {
		for _, id := range c.ids() {
			leaders, preferred, err := c.leadersIn(id, topic)
			if err != nil {
				return false, err.Error()
			}
			if len(leaders) != partitions {
				return false, fmt.Sprintf("broker %d knows %d partitions of %s", id, len(leaders), topic)
			}
			for p, l := range leaders {
				if l != preferred[p] {
					return false, fmt.Sprintf("broker %d: %s-%d led by %d, preferred %d", id, topic, p, l, preferred[p])
				}
			}
		}
		return true, ""
	})
}

// TestSluicectlDrainAndPreferredElection drains broker 2 with `sluicectl
// broker drain 2`, checks on every broker that it leads nothing and
// coordinates no group and that the command named what moved, undrains
// it, and checks that `sluicectl leader elect --preferred` gives every
// partition back to its preferred replica.
func TestSluicectlDrainAndPreferredElection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	ctl := projectBinary(t, "sluicectl")
	c := startCluster(t)
	const topic, partitions = "ops", 6
	c.createTopic(topic, partitions)
	c.waitPreferred(topic, partitions, 2*defaultTimeout, "each partition led by its preferred replica")
	before, preferred, err := c.leadersIn(1, topic)
	if err != nil {
		t.Fatal(err)
	}
	var led []int32 // the partitions broker 2 leads before the drain
	for p, l := range before {
		if l == 2 {
			led = append(led, p)
		}
	}
	if len(led) == 0 {
		t.Fatalf("broker 2 leads no partition of %s before the drain: %v", topic, before)
	}

	// Groups broker 2 coordinates, one of them with a committed offset.
	var groups []string
	for i := 0; len(groups) < 3 && i < 1000; i++ {
		g := fmt.Sprintf("ops-group-%d", i)
		if id, err := c.groupCoordinatorAt(1, g); err == nil && id == 2 {
			groups = append(groups, g)
		}
	}
	if len(groups) < 3 {
		t.Fatalf("found only %d groups placed on broker 2", len(groups))
	}
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, groups[0], offs)
	cancel()
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit an offset in %s: %v", groups[0], err)
	}

	r := c.sluicectl(ctl, 1, "broker", "drain", "2", "--timeout", "90s")
	if r.code != 0 || !strings.Contains(r.stdout, "broker 2 drained") {
		t.Fatalf("broker drain 2: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// The moves are in etcd when the command returns; every broker learns
	// them from its watch, within moments (10 s allows for a loaded
	// machine): broker 2 leads nothing and coordinates none of its groups.
	eventually(t, 10*time.Second, "every broker sees the drain", func() (bool, string) {
		for _, id := range c.ids() {
			leaders, _, err := c.leadersIn(id, topic)
			if err != nil {
				return false, err.Error()
			}
			for p, l := range leaders {
				if l == 2 || l < 0 {
					return false, fmt.Sprintf("broker %d sees %s-%d led by %d", id, topic, p, l)
				}
			}
			for _, g := range groups {
				if co, err := c.groupCoordinatorAt(id, g); err != nil || co == 2 {
					return false, fmt.Sprintf("broker %d places group %s on %d (%v)", id, g, co, err)
				}
			}
		}
		return true, ""
	})
	// The command said what moved: each partition broker 2 led, and to
	// whom, and the group it coordinated.
	after, _, err := c.leadersIn(1, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range led {
		if want := fmt.Sprintf("%s-%d: 2 -> %d", topic, p, after[p]); !strings.Contains(r.stdout, want) {
			t.Errorf("drain output does not say %q:\n%s", want, r.stdout)
		}
	}
	co, err := c.groupCoordinatorAt(1, groups[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("group %s: 2 -> %d", groups[0], co); !strings.Contains(r.stdout, want) {
		t.Errorf("drain output does not say %q:\n%s", want, r.stdout)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Undrained, a preferred election gives broker 2 its partitions back.
	c.sluicectl(ctl, 3, "broker", "undrain", "2").wantCtl(t, 0, "undrained broker 2")
	eventually(t, defaultTimeout, "every broker sees the undrain", func() (bool, string) {
		for _, id := range c.ids() {
			r := c.sluicectl(ctl, id, "--json", "broker", "ls")
			if r.code != 0 || strings.Contains(r.stdout, `"draining": true`) {
				return false, fmt.Sprintf("broker %d: %s %s", id, r.stdout, r.stderr)
			}
		}
		return true, ""
	})
	// Asked of broker 3, the election is carried out by the controller,
	// which answers for every partition of the topic. (The elector also
	// moves leaderships back by itself after a while, so the end state
	// alone would not prove the command did it.)
	c.sluicectl(ctl, 3, "leader", "elect", "--preferred", "--topic", topic).
		wantCtl(t, 0, fmt.Sprintf("preferred election asked of %d partitions (controller %d)", partitions, c.controller()))
	c.waitPreferred(topic, partitions, defaultTimeout, "after leader elect --preferred, each partition led by its preferred replica")
	final, _, err := c.leadersIn(2, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range led {
		if final[p] != 2 || preferred[p] != 2 {
			t.Errorf("%s-%d: led by %d after the preferred election, preferred %d", topic, p, final[p], preferred[p])
		}
	}
}

func (r ctlRun) wantCtl(t *testing.T, code int, stdout string) {
	t.Helper()
	if r.code != code || !strings.Contains(r.stdout, stdout) {
		t.Fatalf("exit %d (want %d), stdout (want %q):\n%s\nstderr:\n%s", r.code, code, stdout, r.stdout, r.stderr)
	}
}
