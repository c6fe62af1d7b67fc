package e2e

// Replication and election against three real sluiced processes
// (docs/architecture.md): a killed leader, the loss of one and then two followers,
// a paused (SIGSTOP) leader that wakes up after its successor took writes,
// and a killed controller. Every test checks that each record a client saw
// acknowledged with acks=all is read back at its acknowledged offset, and
// logs the failover times it measured (they are figures, not assertions).

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failoverTimeout bounds a leader or controller election after a loss. The
// followers complain after 2 s without their leader; 30 s is generous.
const failoverTimeout = 30 * time.Second

// ack is one record a producer saw acknowledged.
type ack struct {
	partition int32
	offset    int64
	value     string
	at        time.Time // when the promise ran
}

// ackLog collects acknowledged and failed records from produce promises.
type ackLog struct {
	mu     sync.Mutex
	acks   []ack   // guarded by mu
	failed []error // guarded by mu
}

func (l *ackLog) promise(r *kgo.Record, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed = append(l.failed, fmt.Errorf("%s: %w", r.Value, err))
		return
	}
	l.acks = append(l.acks, ack{r.Partition, r.Offset, string(r.Value), time.Now()})
}

func (l *ackLog) snapshot() ([]ack, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acks), slices.Clone(l.failed)
}

// countWhere counts the acknowledged records that satisfy f.
func (l *ackLog) countWhere(f func(ack) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.acks {
		if f(a) {
			n++
		}
	}
	return n
}

// manualProducer is an idempotent acks=all producer of the cluster that
// writes to the partition each record names, uncompressed so a broker's
// raw batches can be decoded here.
func (c *cluster) manualProducer() *kgo.Client {
	return c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(45*time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
}

// produceValues produces n records prefix0..prefixN-1 to one partition,
// each waited for, and returns their acknowledgements.
func produceValues(t testing.TB, cl *kgo.Client, topic string, partition int32, prefix string, n int) []ack {
	t.Helper()
	var log ackLog
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		r := &kgo.Record{Topic: topic, Partition: partition, Value: fmt.Appendf(nil, "%s%d", prefix, i)}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			log.promise(r, err)
		})
	}
	wg.Wait()
	acks, failed := log.snapshot()
	if len(failed) > 0 {
		t.Fatalf("%d of %d records %s* to %s/%d failed, first: %v", len(failed), n, prefix, topic, partition, failed[0])
	}
	return acks
}

// consumed is what a fresh consumer read from a topic.
type consumed struct {
	values map[int32]map[int64]string // partition → offset → value
	epochs map[int32]map[int64]int32  // partition → offset → leader epoch of its batch
	counts map[string]int             // value → times read
}

// readAll appends a sentinel record to every partition, then reads the
// topic from the start with a fresh consumer until every sentinel is read,
// so everything acknowledged before is read too.
func (c *cluster) readAll(t testing.TB, topic string, partitions int32) consumed {
	t.Helper()
	prod := c.manualProducer()
	sentinel := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		acks := produceValues(t, prod, topic, p, fmt.Sprintf("sentinel-%d-", p), 1)
		sentinel[p] = acks[0].offset
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cons := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	got := consumed{values: map[int32]map[int64]string{}, epochs: map[int32]map[int64]int32{}, counts: map[string]int{}}
	for p := range partitions {
		got.values[p], got.epochs[p] = map[int64]string{}, map[int64]int32{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	reached := func() (bool, string) {
		var short []string
		for p := range partitions {
			if _, ok := got.values[p][sentinel[p]]; !ok {
				short = append(short, fmt.Sprintf("partition %d: %d records read, sentinel at %d", p, len(got.values[p]), sentinel[p]))
			}
		}
		return len(short) == 0, strings.Join(short, "; ")
	}
	for {
		if ok, _ := reached(); ok {
			return got
		}
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			_, why := reached()
			t.Fatalf("read back %s: not done within %v: %s", topic, defaultTimeout, why)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("consume %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got.values[r.Partition][r.Offset] = string(r.Value)
			got.epochs[r.Partition][r.Offset] = r.LeaderEpoch
			got.counts[string(r.Value)]++
		})
	}
}

// checkAcked fails t unless every acknowledged record is read at its
// offset, no value is read twice, and none of absent is read at all.
func checkAcked(t testing.TB, got consumed, acks []ack, absent ...string) {
	t.Helper()
	var bad []string
	for _, a := range acks {
		if v, ok := got.values[a.partition][a.offset]; !ok || v != a.value {
			bad = append(bad, fmt.Sprintf("%s acknowledged at %d/%d, read %q there", a.value, a.partition, a.offset, v))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d acknowledged records are not read back at their offsets; first ones:\n%s", len(bad), len(acks), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	var dups []string
	for v, n := range got.counts {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%s ×%d", v, n))
		}
	}
	slices.Sort(dups)
	if len(dups) > 0 {
		t.Errorf("%d values read more than once; first ones: %v", len(dups), dups[:min(len(dups), 10)])
	}
	for _, v := range absent {
		if got.counts[v] > 0 {
			t.Errorf("%s was never acknowledged and must not be in the log, but is read %d times", v, got.counts[v])
		}
	}
}

// awaitSameLogs waits until every running broker's high watermark of the
// partition reaches the leader's, then compares their copies of the log
// below it byte for byte.
//
// Each broker's copy is read by a Kafka Fetch sent to that broker alone (a
// consumer Fetch, ReplicaID -1, no leader epoch): Sluice serves it from the
// broker's own log up to that broker's own high watermark, whether it leads
// or follows, so the answer is exactly the batches that broker stored (base
// offset and leader epoch stamped, CRC included). That is simpler than
// parsing the wal segment files under <data-dir>/wal/<topicID>/<partition>
// of running processes, and as sound: equal bytes below the HW are equal
// logs below the HW.
func (c *cluster) awaitSameLogs(t testing.TB, topic string, partition int32) int64 {
	t.Helper()
	leader, _, _ := c.waitLeader(topic, partition, nil, failoverTimeout)
	var target int64
	eventually(t, defaultTimeout, fmt.Sprintf("every broker reaches the leader's high watermark of %s/%d", topic, partition), func() (bool, string) {
		hw, err := c.highWatermark(leader, topic, partition)
		if err != nil {
			return false, err.Error()
		}
		target = hw
		var views []string
		ok := true
		for _, id := range c.up() {
			h, err := c.highWatermark(id, topic, partition)
			if err != nil {
				return false, err.Error()
			}
			views = append(views, fmt.Sprintf("broker %d: %d", id, h))
			ok = ok && h >= target
		}
		return ok, fmt.Sprintf("leader %d at %d; %s", leader, target, strings.Join(views, ", "))
	})
	copies := map[int32][]byte{}
	for _, id := range c.up() {
		data, err := c.logBelow(id, topic, partition, target)
		if err != nil {
			t.Fatalf("read broker %d's copy of %s/%d below %d: %v", id, topic, partition, target, err)
		}
		copies[id] = data
	}
	ref := copies[leader]
	for id, data := range copies {
		if string(data) != string(ref) {
			t.Errorf("%s/%d: broker %d's log below the HW %d (%d bytes) differs from the leader %d's (%d bytes) at byte %d",
				topic, partition, id, target, len(data), leader, len(ref), firstDiff(data, ref))
		}
	}
	t.Logf("%s/%d: the logs of brokers %v are identical below the HW %d (%d bytes)", topic, partition, c.up(), target, len(ref))
	return target
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// batchValues decodes the record values of raw, uncompressed batches by
// offset.
func batchValues(t testing.TB, raw []byte) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for len(raw) >= 61 {
		size := int(binary.BigEndian.Uint32(raw[8:12])) + 12
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[:size]); err != nil {
			t.Fatalf("decode batch: %v", err)
		}
		raw = raw[size:]
		if b.Attributes&0x20 != 0 {
			continue // control batch (a leader's epoch start)
		}
		if b.Attributes&0x07 != 0 {
			t.Fatalf("batch at %d is compressed (attributes %#x)", b.FirstOffset, b.Attributes)
		}
		recs := b.Records
		for range b.NumRecords {
			var r kmsg.Record
			length, n := binary.Varint(recs)
			if err := r.ReadFrom(recs[:n+int(length)]); err != nil {
				t.Fatalf("decode record in batch at %d: %v", b.FirstOffset, err)
			}
			recs = recs[n+int(length):]
			out[b.FirstOffset+int64(r.OffsetDelta)] = string(r.Value)
		}
	}
	return out
}

// TestReplicationLeaderKill: an idempotent acks=all producer streams keyed
// records over three partitions; the leader of partition 0 is killed with
// SIGKILL mid-stream. Another replica leads within seconds, producing goes
// on, and a fresh consumer reads every acknowledged record at its offset,
// each value once (the producer's retries across the leader change were
// deduplicated).
func TestReplicationLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers and kills one")
	}
	const (
		topic      = "leader-kill"
		partitions = 3
		maxRecords = 4000 // the stream stops here whatever happens
	)
	c := startCluster(t)
	c.createTopic(topic, partitions)
	p0, _, err := c.partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	old, ctl := p0.Leader, c.controller()
	t.Logf("partition 0: leader %d epoch %d replicas %v; controller %d", old, p0.Epoch, p0.Replicas, ctl)

	var log ackLog
	prod := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(45*time.Second), kgo.MaxBufferedRecords(500))
	stop := make(chan struct{})
	sent := make(chan int, 1)
	go func() {
		// A steady stream (one record per 2 ms) so the kill lands mid-stream
		// and the run stays short.
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		n := 0
		defer func() { sent <- n }()
		for ; n < maxRecords; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			r := &kgo.Record{Key: fmt.Appendf(nil, "key-%d", n%97), Value: fmt.Appendf(nil, "lk-%d", n)}
			prod.Produce(context.Background(), r, log.promise)
		}
	}()
	stopped := false
	stopStream := func() int {
		if !stopped {
			stopped = true
			close(stop)
		}
		return <-sent
	}
	defer func() {
		if !stopped {
			stopStream()
		}
	}()

	eventually(t, defaultTimeout, "records acknowledged on every partition before the kill", func() (bool, string) {
		var counts []int
		ok := true
		for p := range int32(partitions) {
			n := log.countWhere(func(a ack) bool { return a.partition == p })
			counts = append(counts, n)
			ok = ok && n >= 100
		}
		return ok, fmt.Sprintf("acknowledged per partition %v", counts)
	})
	killedAt := time.Now()
	c.kill(old)
	leader, epoch, took := c.waitLeader(topic, 0, []int32{old}, failoverTimeout)
	t.Logf("broker %d (leader of partition 0%s) killed; broker %d leads at epoch %d (was %d) %v later (seen in Metadata)",
		old, map[bool]string{true: ", and the controller", false: ""}[old == ctl], leader, epoch, p0.Epoch, took.Round(time.Millisecond))

	eventually(t, defaultTimeout, "partition 0 takes writes again after the kill", func() (bool, string) {
		n := log.countWhere(func(a ack) bool { return a.partition == 0 && a.at.After(killedAt) })
		return n >= 200, fmt.Sprintf("%d records acknowledged on partition 0 since the kill", n)
	})
	n := stopStream()
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("flush the producer: %v", err)
	}
	acks, failed := log.snapshot()
	gap := time.Duration(0)
	for _, a := range acks {
		if a.partition == 0 && a.at.After(killedAt) && (gap == 0 || a.at.Sub(killedAt) < gap) {
			gap = a.at.Sub(killedAt)
		}
	}
	t.Logf("%d records produced, %d acknowledged, %d failed; first acknowledgement on partition 0 %v after the kill",
		n, len(acks), len(failed), gap.Round(time.Millisecond))
	if len(failed) > 0 {
		t.Errorf("%d records failed; first: %v", len(failed), failed[0])
	}

	got := c.readAll(t, topic, partitions)
	checkAcked(t, got, acks)
	atNew := 0
	for _, a := range acks {
		if a.partition == 0 && got.epochs[0][a.offset] >= epoch {
			atNew++
		}
	}
	final, _, _ := c.partition(topic, 0)
	t.Logf("%d acknowledged records read back; %d of them on partition 0 written at the new epoch %d; partition 0 now: leader %d epoch %d",
		len(acks), atNew, epoch, final.Leader, final.Epoch)
	if atNew == 0 {
		t.Errorf("no acknowledged record of partition 0 was written at the new leader's epoch %d", epoch)
	}
}

// followers is the partition's replicas other than its leader.
func (pi partitionInfo) followers() []int32 {
	var out []int32
	for _, id := range pi.Replicas {
		if id != pi.Leader {
			out = append(out, id)
		}
	}
	return out
}

// TestReplicationFollowerLoss: with one follower killed, acks=all writes
// go on (two of three replicas). With the second killed too, the lone
// leader acknowledges nothing and, once it notices (its followers' lag
// window), refuses produce with NOT_ENOUGH_REPLICAS at once; what it holds
// below the HW is still read from it. Both followers restarted catch up,
// and the three replicas' logs are identical below the HW.
//
// Two of three brokers down is also two of three etcd members down: the
// lone broker's metadata store has no quorum until a follower returns.
func TestReplicationFollowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers and kills two")
	}
	const topic = "follower-loss"
	c := startCluster(t)
	c.createTopic(topic, 1)
	pi, _, err := c.partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	leader, fs := pi.Leader, pi.followers()
	if len(fs) != 2 {
		t.Fatalf("partition 0: leader %d, replicas %v: want two followers", leader, pi.Replicas)
	}
	t.Logf("partition 0: leader %d epoch %d, followers %v; controller %d", leader, pi.Epoch, fs, c.controller())
	prod := c.manualProducer()
	acks := produceValues(t, prod, topic, 0, "all-up-", 100)

	c.kill(fs[0])
	start := time.Now()
	acks = append(acks, produceValues(t, prod, topic, 0, "one-down-", 100)...)
	t.Logf("follower %d killed: 100 acks=all records acknowledged by two of three replicas in %v", fs[0], time.Since(start).Round(time.Millisecond))

	c.kill(fs[1])
	killedAt := time.Now()
	// One produce sent at once is held: the leader appends it and waits for
	// a follower. The brief's contract is that it is never acknowledged
	// while the followers are gone; Kafka would answer REQUEST_TIMED_OUT
	// after the request's 2 s timeout.
	type answer struct {
		pr   kmsg.ProduceResponseTopicPartition
		err  error
		took time.Duration
		at   time.Time
	}
	held := make(chan answer, 1)
	heldClient := c.newDirectClient(leader)
	defer heldClient.Close()
	go func() {
		pr, err := produceVia(heldClient, topic, 0, -1, 2*time.Second, time.Minute, "lone-held")
		held <- answer{pr, err, time.Since(killedAt), time.Now()}
	}()
	// Probes, one at a time, each given 1 s for an answer, until one is
	// refused with NOT_ENOUGH_REPLICAS.
	var outcomes, refused, unanswered []string
	var refusedAfter time.Duration
	attempt := 0
	eventually(t, defaultTimeout, "the lone leader refuses produce with NOT_ENOUGH_REPLICAS", func() (bool, string) {
		v := fmt.Sprintf("lone-%d", attempt)
		attempt++
		sent := time.Now()
		pr, err := produceVia(c.directClient(leader), topic, 0, -1, 2*time.Second, time.Second, v)
		took := time.Since(sent).Round(time.Millisecond)
		switch {
		case err != nil:
			outcomes = append(outcomes, fmt.Sprintf("%s at +%v: %v after %v", v, sent.Sub(killedAt).Round(time.Millisecond), err, took))
			unanswered = append(unanswered, v)
		case pr.ErrorCode == 0:
			t.Errorf("%s acknowledged at offset %d with acks=all while both followers are dead", v, pr.BaseOffset)
			outcomes = append(outcomes, fmt.Sprintf("%s: ACKNOWLEDGED at %d after %v", v, pr.BaseOffset, took))
		default:
			outcomes = append(outcomes, fmt.Sprintf("%s at +%v: %s after %v", v, sent.Sub(killedAt).Round(time.Millisecond), codeName(pr.ErrorCode), took))
			if pr.ErrorCode == kerr.NotEnoughReplicas.Code {
				refused = append(refused, v)
				refusedAfter = time.Since(killedAt)
				return true, ""
			}
			unanswered = append(unanswered, v)
		}
		return false, strings.Join(outcomes, "; ")
	})
	t.Logf("second follower %d killed; produce to the lone leader %d: %s", fs[1], leader, strings.Join(outcomes, "; "))
	t.Logf("first NOT_ENOUGH_REPLICAS %v after the kill", refusedAfter.Round(time.Millisecond))
	sent := time.Now()
	pr, err := c.produceTo(leader, topic, 0, -1, 2*time.Second, "lone-again")
	switch {
	case err != nil:
		t.Errorf("produce to the lone leader once it noticed: %v", err)
	case pr.ErrorCode != kerr.NotEnoughReplicas.Code:
		t.Errorf("produce to the lone leader once it noticed: %s after %v, want NOT_ENOUGH_REPLICAS", codeName(pr.ErrorCode), time.Since(sent))
	default:
		refused = append(refused, "lone-again")
		t.Logf("once noticed, produce is refused with NOT_ENOUGH_REPLICAS in %v", time.Since(sent).Round(time.Millisecond))
	}

	// The lone broker still serves what it holds below its high watermark.
	hw, err := c.highWatermark(leader, topic, 0)
	if err != nil {
		t.Fatalf("read the lone leader's high watermark: %v", err)
	}
	data, err := c.logBelow(leader, topic, 0, hw)
	if err != nil {
		t.Fatalf("read the lone leader's log below its HW %d: %v", hw, err)
	}
	served := batchValues(t, data)
	missing := 0
	for _, a := range acks {
		if served[a.offset] != a.value {
			missing++
		}
	}
	t.Logf("the lone leader serves %d records below its HW %d", len(served), hw)
	if missing > 0 {
		t.Errorf("the lone leader serves %d of %d acknowledged records below its HW %d", len(acks)-missing, len(acks), hw)
	}

	restartAt := time.Now()
	heldBefore := ""
	select {
	case a := <-held:
		held <- a
		heldBefore = "answered before the restart"
		if a.err == nil && a.pr.ErrorCode == 0 {
			t.Errorf("lone-held acknowledged at offset %d, %v after the kill, while both followers were dead", a.pr.BaseOffset, a.took)
		}
	default:
		heldBefore = fmt.Sprintf("still unanswered %v after the kill (its timeout was 2 s)", restartAt.Sub(killedAt).Round(time.Millisecond))
	}
	t.Logf("the produce sent as the second follower died (lone-held): %s", heldBefore)
	c.restart(fs...)
	t.Logf("followers %v restarted and ready in %v", fs, time.Since(restartAt).Round(time.Millisecond))
	acks = append(acks, produceValues(t, prod, topic, 0, "all-back-", 100)...)
	a := <-held
	switch {
	case a.err != nil:
		t.Logf("lone-held: no answer: %v, %v after the kill", a.err, a.took.Round(time.Millisecond))
		unanswered = append(unanswered, "lone-held")
	case a.pr.ErrorCode == 0:
		t.Logf("lone-held: acknowledged at offset %d, %v after the kill (%v after the restart began)", a.pr.BaseOffset, a.took.Round(time.Millisecond), a.at.Sub(restartAt).Round(time.Millisecond))
		acks = append(acks, ack{0, a.pr.BaseOffset, "lone-held", a.at})
	default:
		t.Logf("lone-held: %s, %v after the kill", codeName(a.pr.ErrorCode), a.took.Round(time.Millisecond))
		unanswered = append(unanswered, "lone-held")
	}
	c.awaitSameLogs(t, topic, 0)
	got := c.readAll(t, topic, 1)
	// Kafka refuses with NOT_ENOUGH_REPLICAS before appending, so a refused
	// record never shows up; one left unanswered (a timeout) may.
	checkAcked(t, got, acks, refused...)
	var late []string
	for _, v := range unanswered {
		if got.counts[v] > 0 {
			late = append(late, v)
		}
	}
	t.Logf("%d acknowledged records read back; of the %d unanswered or otherwise refused produces, %v are in the log", len(acks), len(unanswered), late)
}

// readProduceAnswer reads the answer to a Produce request already written
// on rc.
func readProduceAnswer(t testing.TB, rc *rawConn, req *kmsg.ProduceRequest, corr int32) (kmsg.ProduceResponseTopicPartition, error) {
	t.Helper()
	body, err := rc.readFrame()
	if err != nil {
		return kmsg.ProduceResponseTopicPartition{}, fmt.Errorf("read produce answer: %w", err)
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != corr {
		return kmsg.ProduceResponseTopicPartition{}, fmt.Errorf("produce answer of %d bytes does not answer correlation id %d", len(body), corr)
	}
	body = body[4:]
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			return kmsg.ProduceResponseTopicPartition{}, fmt.Errorf("produce answer header: %w", err)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return kmsg.ProduceResponseTopicPartition{}, fmt.Errorf("decode produce answer: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kmsg.ProduceResponseTopicPartition{}, fmt.Errorf("produce answer names %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0], nil
}

// zombieCodes are the answers a deposed leader may give a produce.
var zombieCodes = []int16{kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code}

// TestReplicationPausedLeader: the leader of a partition is frozen with
// SIGSTOP for longer than its registration lease (--registration-ttl 3s);
// another replica is elected and takes writes. Produce requests written to
// the frozen leader's socket meanwhile (acks=all, then acks=1) are read by
// it the moment it is resumed, before it can have heard of the new epoch:
// it must acknowledge neither, answering NOT_LEADER_OR_FOLLOWER or
// FENCED_LEADER_EPOCH. It then truncates to the new leader's log and
// follows it, and every acknowledged record is read back.
func TestReplicationPausedLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers and pauses one")
	}
	const (
		topic      = "paused-leader"
		partitions = 3
		lease      = 3 * time.Second
	)
	c := startCluster(t, "--registration-ttl", lease.String())
	c.createTopic(topic, partitions)
	// A partition whose leader is not the controller: pausing the
	// controller too is another test (TestReplicationControllerKill).
	ctl := c.controller()
	part, old := int32(-1), int32(-1)
	var pi partitionInfo
	for p := range int32(partitions) {
		info, _, err := c.partition(topic, p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Leader != ctl {
			part, old, pi = p, info.Leader, info
			break
		}
	}
	if part < 0 {
		t.Fatalf("every partition of %s is led by the controller %d", topic, ctl)
	}
	t.Logf("partition %d: leader %d epoch %d replicas %v; controller %d", part, old, pi.Epoch, pi.Replicas, ctl)
	// A frozen broker accepts connections and never answers: the producer
	// gives up on a request to it after 3+2 s rather than franz-go's 10+10.
	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(45*time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProduceRequestTimeout(3*time.Second), kgo.RequestTimeoutOverhead(2*time.Second))
	acks := produceValues(t, prod, topic, part, "before-", 100)

	// A raw connection to the leader, opened before it is frozen.
	addr := c.node(old).kafkaAddr
	vs := brokerVersions(t, addr)
	rc := dialRaw(t, addr)
	preq := kmsg.NewPtrProduceRequest()
	version := pickVersion(t, vs, preq, lastNamedVersion)

	pausedAt := time.Now()
	c.pause(old)
	leader, epoch, took := c.waitLeader(topic, part, []int32{old}, failoverTimeout)
	t.Logf("broker %d paused; broker %d leads partition %d at epoch %d (was %d) %v later", old, leader, part, epoch, pi.Epoch, took.Round(time.Millisecond))
	eventually(t, defaultTimeout, fmt.Sprintf("broker %d's registration lapses", old), func() (bool, string) {
		md, err := c.metadata(leader)
		if err != nil {
			return false, err.Error()
		}
		return !slices.Contains(brokerIDs(md), old), fmt.Sprintf("broker %d lists %v", leader, brokerIDs(md))
	})
	t.Logf("broker %d's registration lapsed %v after the pause (lease %v)", old, time.Since(pausedAt).Round(time.Millisecond), lease)
	start := time.Now()
	acks = append(acks, produceValues(t, prod, topic, part, "new-epoch-", 100)...)
	t.Logf("100 records acknowledged at the new leader in %v", time.Since(start).Round(time.Millisecond))

	// Two produces wait in the frozen broker's socket: acks=all, then acks=1.
	zombies := []string{"zombie-acks-all", "zombie-acks-1"}
	var corrs []int32
	for i, acksMode := range []int16{-1, 1} {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(version)
		req.Acks = acksMode
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = part
		rp.Records = valuesBatch(zombies[i])
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rc.write(rc.frame(req))
		corrs = append(corrs, rc.corr)
		preq = req
	}
	pausedFor := time.Since(pausedAt)
	c.resume(old)
	resumedAt := time.Now()
	t.Logf("broker %d resumed after %v paused", old, pausedFor.Round(time.Millisecond))
	for i, corr := range corrs {
		pr, err := readProduceAnswer(t, rc, preq, corr)
		switch {
		case err != nil:
			t.Errorf("%s: %v (%v after the resume)", zombies[i], err, time.Since(resumedAt))
		case pr.ErrorCode == 0:
			t.Errorf("%s: ACKNOWLEDGED at offset %d by the deposed leader %d, %v after its resume; epoch %d began while it was paused",
				zombies[i], pr.BaseOffset, old, time.Since(resumedAt).Round(time.Millisecond), epoch)
		case !slices.Contains(zombieCodes, pr.ErrorCode):
			t.Errorf("%s: %s from the deposed leader, want NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH", zombies[i], codeName(pr.ErrorCode))
		default:
			t.Logf("%s: %s from the deposed leader %v after its resume", zombies[i], codeName(pr.ErrorCode), time.Since(resumedAt).Round(time.Millisecond))
		}
	}
	// And one sent once it runs again.
	pr, err := c.produceTo(old, topic, part, -1, 5*time.Second, "zombie-after")
	zombies = append(zombies, "zombie-after")
	switch {
	case err != nil:
		t.Errorf("zombie-after: %v", err)
	case pr.ErrorCode == 0:
		t.Errorf("zombie-after: ACKNOWLEDGED at offset %d by the deposed leader %d", pr.BaseOffset, old)
	case !slices.Contains(zombieCodes, pr.ErrorCode):
		t.Errorf("zombie-after: %s from the deposed leader, want NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH", codeName(pr.ErrorCode))
	default:
		t.Logf("zombie-after: %s", codeName(pr.ErrorCode))
	}

	// It follows the new leader: same log below the HW.
	acks = append(acks, produceValues(t, prod, topic, part, "after-resume-", 100)...)
	c.awaitSameLogs(t, topic, part)
	t.Logf("broker %d caught up %v after its resume; its log says: %v", old, time.Since(resumedAt).Round(time.Millisecond),
		c.grepLog(old, "truncated the log"))
	got := c.readAll(t, topic, partitions)
	checkAcked(t, got, acks, zombies...)
	t.Logf("%d acknowledged records read back; none of %v", len(acks), zombies)

	// Its lease lapsed while it was frozen; it should register again (it
	// is given five leases).
	eventually(t, 5*lease, fmt.Sprintf("broker %d is listed again after its resume", old), func() (bool, string) {
		md, err := c.metadata(leader)
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(brokerIDs(md), old), fmt.Sprintf("broker %d lists %v", leader, brokerIDs(md))
	})
	t.Logf("broker %d listed again %v after its resume", old, time.Since(resumedAt).Round(time.Millisecond))
}

// TestReplicationControllerKill: the controller is killed with SIGKILL;
// another broker becomes controller within seconds (Metadata
// ControllerID, as every survivor answers it), and a partition it led
// gets a new leader that takes acks=all writes.
func TestReplicationControllerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers and kills one")
	}
	const (
		topic      = "controller-kill"
		partitions = 3
	)
	c := startCluster(t)
	c.createTopic(topic, partitions)
	ctl := c.controller()
	part := int32(-1)
	var layout []string
	for p := range int32(partitions) {
		info, _, err := c.partition(topic, p)
		if err != nil {
			t.Fatal(err)
		}
		layout = append(layout, fmt.Sprintf("%d: leader %d epoch %d", p, info.Leader, info.Epoch))
		if info.Leader == ctl && part < 0 {
			part = p
		}
	}
	t.Logf("controller %d; partitions %s", ctl, strings.Join(layout, ", "))
	if part < 0 {
		t.Fatalf("the controller %d leads no partition of %s: %s", ctl, topic, strings.Join(layout, ", "))
	}
	prod := c.manualProducer()
	var acks []ack
	for p := range int32(partitions) {
		acks = append(acks, produceValues(t, prod, topic, p, fmt.Sprintf("before-%d-", p), 100)...)
	}

	killedAt := time.Now()
	c.kill(ctl)
	var next int32
	eventually(t, failoverTimeout, "the survivors name a new controller", func() (bool, string) {
		var why string
		next, why = c.controllerView()
		return next > 0 && next != ctl, why
	})
	ctlTook := time.Since(killedAt)
	leader, epoch, _ := c.waitLeader(topic, part, []int32{ctl}, failoverTimeout)
	leaderTook := time.Since(killedAt)
	t.Logf("controller %d killed: broker %d is controller %v later; partition %d led by broker %d at epoch %d %v after the kill",
		ctl, next, ctlTook.Round(time.Millisecond), part, leader, epoch, leaderTook.Round(time.Millisecond))
	for p := range int32(partitions) {
		acks = append(acks, produceValues(t, prod, topic, p, fmt.Sprintf("after-%d-", p), 100)...)
	}
	got := c.readAll(t, topic, partitions)
	checkAcked(t, got, acks)
	t.Logf("%d acknowledged records read back", len(acks))
}
