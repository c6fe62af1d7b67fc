package e2e

// Consumer groups with real clients: kcat -G, confluent-kafka-python
// members with cooperative-sticky and range (one of them crashing
// mid-stream), and franz-go committed offsets across a broker restart.
// Each test skips while the broker does not advertise JoinGroup (key 11),
// and must pass once it does.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// requireGroupAPIs skips t while b does not advertise JoinGroup.
func requireGroupAPIs(t testing.TB, b *broker) {
	t.Helper()
	if _, ok := brokerVersions(t, b.kafkaAddr)[11]; !ok {
		t.Skip("broker does not advertise JoinGroup (key 11) in ApiVersions: consumer groups have not landed yet")
	}
}

// lineProc is an external process whose stdout lines are collected as they
// arrive. t.Cleanup kills it if it is still running and waits for it.
type lineProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been waited for

	mu      sync.Mutex
	lines   []string     // guarded by mu
	stderr  bytes.Buffer // guarded by mu
	waitErr error        // set before done is closed
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func startLineProc(t testing.TB, name, bin string, args ...string) *lineProc {
	t.Helper()
	p := &lineProc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("%s: stdout pipe: %v", name, err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: start %s: %v", name, bin, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			p.mu.Lock()
			t.Logf("%s: last stdout lines:\n%s\nstderr:\n%s", name, strings.Join(p.lines[max(0, len(p.lines)-30):], "\n"), lastN(p.stderr.String(), 3000))
			p.mu.Unlock()
		}
	})
	return p
}

func (p *lineProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *lineProc) output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// terminate sends SIGTERM and waits for the exit.
func (p *lineProc) terminate(t testing.TB) error {
	t.Helper()
	if !p.exited() {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !p.exited() {
			t.Fatalf("%s: SIGTERM: %v", p.name, err)
		}
	}
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still running 30s after SIGTERM", p.name)
		return nil
	}
}

// produceSpread writes perPartition records to every partition of topic
// with values value(p, i) and fails on any error.
func produceSpread(t testing.TB, b *broker, topic string, partitions int32, perPartition int, value func(p int32, i int) string) {
	t.Helper()
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	var recs []*kgo.Record
	for i := range perPartition {
		for p := range partitions {
			recs = append(recs, &kgo.Record{Partition: p, Value: []byte(value(p, i))})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// committedOffsets returns the group's committed offset per partition of topic.
func committedOffsets(t testing.TB, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resps, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := resps.Error(); err != nil {
		return nil, err
	}
	out := make(map[int32]int64)
	for p, r := range resps[topic] {
		out[p] = r.At
	}
	return out, nil
}

func TestKcatGroupConsumer(t *testing.T) {
	const (
		topic        = "kcat-group"
		group        = "kcat-grp"
		partitions   = 3
		perPartition = 100
	)
	kcat := requireTool(t, "kcat")
	b := startBroker(t, brokerOptions{})
	requireGroupAPIs(t, b)
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, partitions, nil)
	value := func(p int32, i int) string { return fmt.Sprintf("kg-%d-%03d", p, i) }
	produceSpread(t, b, topic, partitions, perPartition, value)

	proc := startLineProc(t, "kcat -G", kcat, "-u", "-b", b.kafkaAddr, "-G", group, "-f", `%p %o %s\n`, // -u: unbuffered, or the last lines wait in stdio
		"-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=200", topic)
	var got map[string]string // value -> "partition offset"
	eventually(t, 60*time.Second, "kcat -G prints every record", func() (bool, string) {
		if proc.exited() {
			t.Fatalf("kcat -G exited early: %v", proc.waitErr)
		}
		got = make(map[string]string)
		for _, l := range proc.output() {
			f := strings.SplitN(l, " ", 3)
			if len(f) != 3 {
				t.Fatalf("kcat -G printed %q, want \"partition offset value\"", l)
			}
			if prev, dup := got[f[2]]; dup {
				t.Fatalf("kcat -G printed %s twice: at %s and %s %s", f[2], prev, f[0], f[1])
			}
			got[f[2]] = f[0] + " " + f[1]
		}
		return len(got) == partitions*perPartition, fmt.Sprintf("%d of %d records", len(got), partitions*perPartition)
	})
	for p := range int32(partitions) {
		for i := range perPartition {
			if where := got[value(p, i)]; where != fmt.Sprintf("%d %d", p, i) {
				t.Errorf("%s printed at %q, produced at partition %d offset %d", value(p, i), where, p, i)
			}
		}
	}

	// kcat auto-commits what it consumed.
	eventually(t, 30*time.Second, "kcat's commits reach the end of every partition", func() (bool, string) {
		offs, err := committedOffsets(t, adm, group, topic)
		if err != nil {
			return false, err.Error()
		}
		for p := range int32(partitions) {
			if offs[p] != perPartition {
				return false, fmt.Sprintf("committed %v, want %d for each of %d partitions", offs, perPartition, partitions)
			}
		}
		return true, ""
	})
	proc.terminate(t) // kcat's exit status after a signal is not part of the contract
}

// groupEvents is what one confluent_groups.py member printed.
type groupEvents struct {
	assignment string              // the latest ASSIGNMENT
	consumed   [][2]int64          // (partition, offset) per MSG, in order
	values     map[[2]int64]string // (partition, offset) -> value
	committed  map[int64]int64     // partition -> highest COMMITTED next offset
	failed     map[[2]int64]bool   // (partition, next offset) of each COMMITFAIL
	errors     []string            // ERROR lines
	closed     bool
}

func parseGroupEvents(t testing.TB, lines []string) groupEvents {
	t.Helper()
	ev := groupEvents{values: map[[2]int64]string{}, committed: map[int64]int64{}, failed: map[[2]int64]bool{}}
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("confluent_groups.py: bad number %q", s)
		}
		return n
	}
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "ASSIGNMENT":
			ev.assignment = f[1]
		case len(f) == 4 && f[0] == "MSG":
			po := [2]int64{num(f[1]), num(f[2])}
			ev.consumed = append(ev.consumed, po)
			ev.values[po] = f[3]
		case len(f) == 3 && f[0] == "COMMITTED":
			ev.committed[num(f[1])] = max(ev.committed[num(f[1])], num(f[2]))
		case len(f) >= 3 && f[0] == "COMMITFAIL":
			ev.failed[[2]int64{num(f[1]), num(f[2])}] = true
		case len(f) >= 1 && f[0] == "ERROR":
			ev.errors = append(ev.errors, l)
		case len(f) == 1 && f[0] == "CLOSED":
			ev.closed = true
		default:
			t.Fatalf("confluent_groups.py printed %q", l)
		}
	}
	return ev
}

func TestConfluentGroups(t *testing.T) {
	const (
		python       = "/usr/bin/python3"
		partitions   = 4
		perPartition = 100
		dieAfter     = 30
	)
	if out, err := exec.Command(python, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		requireCI(t, python+" with confluent_kafka", fmt.Errorf("%w: %s", err, out))
	}
	b := startBroker(t, brokerOptions{})
	requireGroupAPIs(t, b)
	adm := newAdmin(t, b)

	for _, strategy := range []string{"cooperative-sticky", "range"} {
		t.Run(strategy, func(t *testing.T) {
			topic, group := "cgroups-"+strategy, "cgroups-grp-"+strategy
			createTopic(t, adm, topic, partitions, nil)
			member := func(name string, extra ...string) *lineProc {
				args := append([]string{"testdata/confluent_groups.py", "--bootstrap", b.kafkaAddr, "--topic", topic,
					"--group", group, "--strategy", strategy}, extra...)
				return startLineProc(t, name, python, args...)
			}
			doomed := member("member A (dies after "+strconv.Itoa(dieAfter)+")", "--die-after", strconv.Itoa(dieAfter))
			survivor := member("member B")

			// Produce only once both members own partitions, so A dies
			// holding some and B must take them over.
			eventually(t, 60*time.Second, "both members own partitions", func() (bool, string) {
				a := parseGroupEvents(t, doomed.output()).assignment
				s := parseGroupEvents(t, survivor.output()).assignment
				why := fmt.Sprintf("A owns %q, B owns %q", a, s)
				if a == "" || a == "-" || s == "" || s == "-" {
					return false, why
				}
				all := strings.Split(a+","+s, ",")
				sort.Strings(all)
				return strings.Join(all, ",") == "0,1,2,3", why
			})
			value := func(p int32, i int) string { return fmt.Sprintf("cg-%d-%03d", p, i) }
			produceSpread(t, b, topic, partitions, perPartition, value)

			// A crashes on its own; B ends up consuming everything A left.
			var evA, evB groupEvents
			eventually(t, 90*time.Second, "every record consumed after A's crash", func() (bool, string) {
				evA, evB = parseGroupEvents(t, doomed.output()), parseGroupEvents(t, survivor.output())
				if survivor.exited() {
					t.Fatalf("member B exited: %v", survivor.waitErr)
				}
				covered := make(map[[2]int64]bool)
				for _, po := range append(append([][2]int64(nil), evA.consumed...), evB.consumed...) {
					covered[po] = true
				}
				return doomed.exited() && len(covered) == partitions*perPartition,
					fmt.Sprintf("A exited %v after %d messages; %d of %d records consumed", doomed.exited(), len(evA.consumed), len(covered), partitions*perPartition)
			})
			var exitErr *exec.ExitError
			if !errors.As(doomed.waitErr, &exitErr) || exitErr.ExitCode() != 1 || len(evA.consumed) != dieAfter {
				t.Errorf("member A: exit %v after %d messages, want os._exit(1) after %d", doomed.waitErr, len(evA.consumed), dieAfter)
			}
			if err := survivor.terminate(t); err != nil || !parseGroupEvents(t, survivor.output()).closed {
				t.Errorf("member B: exit %v on SIGTERM; want a clean close and exit 0", err)
			}
			for _, e := range append(evA.errors, evB.errors...) {
				t.Logf("consumer error reported: %s", e)
			}
			checkGroupDelivery(t, value, evA, evB)
		})
	}
}

// checkGroupDelivery checks what the members consumed: the right value at
// every offset, and a record consumed twice only if a member consumed it
// without committing past it (A's last message, or a failed commit).
func checkGroupDelivery(t testing.TB, value func(p int32, i int) string, members ...groupEvents) {
	t.Helper()
	times := make(map[[2]int64]int)
	uncommitted := make(map[[2]int64]bool)
	for _, ev := range members {
		for _, po := range ev.consumed {
			if want := value(int32(po[0]), int(po[1])); ev.values[po] != want {
				t.Errorf("partition %d offset %d: consumed %q, produced %q", po[0], po[1], ev.values[po], want)
			}
			times[po]++
			if ev.committed[po[0]] <= po[1] || ev.failed[[2]int64{po[0], po[1] + 1}] {
				uncommitted[po] = true
			}
		}
	}
	dups := 0
	for po, n := range times {
		if n == 1 {
			continue
		}
		dups++
		if !uncommitted[po] {
			t.Errorf("partition %d offset %d consumed %d times although every member that consumed it committed past it", po[0], po[1], n)
		}
	}
	t.Logf("%d records consumed, %d of them more than once (after a crash or a failed commit)", len(times), dups)
}

func TestGroupOffsetsSurviveRestart(t *testing.T) {
	const (
		topic        = "group-restart"
		group        = "group-restart-grp"
		partitions   = 2
		perPartition = 100
	)
	b := startBroker(t, brokerOptions{})
	requireGroupAPIs(t, b)
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, partitions, nil)
	value := func(p int32, i int) string { return fmt.Sprintf("gr-%d-%03d", p, i) }
	produceSpread(t, b, topic, partitions, perPartition, value)

	groupClient := func() *kgo.Client {
		return newClient(t, b, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// First member: consume a part, commit exactly what it processed, leave.
	first := groupClient()
	var processed []*kgo.Record
	for len(processed) < perPartition {
		fs := first.PollRecords(ctx, 10)
		if ctx.Err() != nil {
			t.Fatalf("first member: %d records consumed before the deadline", len(processed))
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("first member: %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		processed = append(processed, fs.Records()...)
	}
	if err := first.CommitRecords(ctx, processed...); err != nil {
		t.Fatalf("commit %d records: %v", len(processed), err)
	}
	want := make(map[int32]int64)
	for _, r := range processed {
		want[r.Partition] = max(want[r.Partition], r.Offset+1)
	}
	first.Close()
	got, err := committedOffsets(t, adm, group, topic)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed offsets before the restart: %v (%v), want %v", got, err, want)
	}

	b.Stop()
	b.Restart()
	adm = newAdmin(t, b)
	eventually(t, defaultTimeout, "committed offsets after the restart", func() (bool, string) {
		got, err := committedOffsets(t, adm, group, topic)
		if err != nil {
			return false, err.Error()
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("committed %v, want %v", got, want)
	})

	// A new member resumes at the commit: every record after it, none before.
	second := groupClient()
	remaining := partitions*perPartition - len(processed)
	seen := make(map[int32]int64) // partition -> next expected offset
	for p, o := range want {
		seen[p] = o
	}
	for n := 0; n < remaining; {
		fs := second.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("second member: %d of %d remaining records consumed before the deadline", n, remaining)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("second member: %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		for _, r := range fs.Records() {
			if r.Offset != seen[r.Partition] {
				t.Fatalf("second member read %d/%d, want %d/%d (resume at the commit %v, in order, once)", r.Partition, r.Offset, r.Partition, seen[r.Partition], want)
			}
			if string(r.Value) != value(r.Partition, int(r.Offset)) {
				t.Fatalf("%d/%d holds %q, want %q", r.Partition, r.Offset, r.Value, value(r.Partition, int(r.Offset)))
			}
			seen[r.Partition]++
			n++
		}
	}
	for p := range int32(partitions) {
		if seen[p] != perPartition {
			t.Errorf("partition %d: second member stopped at %d, want %d", p, seen[p], perPartition)
		}
	}
}
