package e2e

// Client compatibility with IBM/sarama, configured once as a modern Kafka
// (3.6) and once as an old one (2.1), which changes every request version
// it sends: ClusterAdmin creates the topic, an idempotent acks=all
// SyncProducer writes keyed records with headers and explicit timestamps,
// consumer groups with the range, round-robin and sticky strategies (two
// members each) consume and commit everything, a second run of each group
// resumes exactly at its commits, and GetOffset finds offsets by time.
//
// Invariant: the topic holds exactly what saramaEnv.log records (only the
// test's own producer writes to it), so every consumed record is compared
// with what was acknowledged at that partition and offset.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

const (
	saramaPartitions = 3
	saramaRecords    = 300
)

// saramaSent is one record the SyncProducer had acknowledged.
type saramaSent struct {
	key, value string
	headers    []sarama.RecordHeader
	timestamp  time.Time
	offset     int64
}

// saramaLog is what the topic must hold: per partition, every acknowledged
// record at index == offset.
type saramaLog map[int32][]saramaSent

func (l saramaLog) ends() map[int32]int64 {
	out := make(map[int32]int64)
	for p, recs := range l {
		out[p] = int64(len(recs))
	}
	return out
}

func saramaConfig(version sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "sluice-e2e-sarama"
	cfg.Metadata.Retry.Max = 20
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	return cfg
}

// saramaEnv is one version's topic and the clients that share it; only the
// test goroutine uses it.
type saramaEnv struct {
	name     string // version label, part of topic, group and value names
	version  sarama.KafkaVersion
	addrs    []string
	topic    string
	admin    sarama.ClusterAdmin
	producer sarama.SyncProducer
	t0       time.Time // timestamp of record i is t0 + i ms
	log      saramaLog
}

func TestSaramaClient(t *testing.T) {
	b := startBroker(t, brokerOptions{noAutoCreate: true})
	for _, tc := range []struct {
		name    string
		version sarama.KafkaVersion
	}{
		{"kafka-3.6", sarama.V3_6_0_0},
		{"kafka-2.1", sarama.V2_1_0_0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, ".", "-")
			env := &saramaEnv{name: name, version: tc.version, addrs: []string{b.kafkaAddr}, topic: "sarama-" + name,
				t0: time.Now().Add(-time.Minute).Truncate(time.Millisecond)}
			env.createTopic(t)
			env.produce(t)
			env.checkOffsetsByTime(t)
			for _, strategy := range []sarama.BalanceStrategy{
				sarama.NewBalanceStrategyRange(),
				sarama.NewBalanceStrategyRoundRobin(),
				sarama.NewBalanceStrategySticky(),
			} {
				t.Run(strategy.Name(), func(t *testing.T) { env.groupRoundTrip(t, strategy) })
			}
		})
	}
	b.Alive(t)
}

// createTopic creates the topic with ClusterAdmin and describes it until
// every partition has a leader.
func (env *saramaEnv) createTopic(t *testing.T) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(env.addrs, saramaConfig(env.version))
	if err != nil {
		t.Fatalf("sarama.NewClusterAdmin: %v", err)
	}
	t.Cleanup(func() { admin.Close() })
	env.admin = admin
	detail := &sarama.TopicDetail{NumPartitions: saramaPartitions, ReplicationFactor: 1}
	if err := admin.CreateTopic(env.topic, detail, false); err != nil {
		t.Fatalf("ClusterAdmin.CreateTopic(%s, %d partitions): %v", env.topic, saramaPartitions, err)
	}
	if err := admin.CreateTopic(env.topic, detail, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Errorf("ClusterAdmin.CreateTopic(%s) again: %v, want %v", env.topic, err, sarama.ErrTopicAlreadyExists)
	}
	eventually(t, 20*time.Second, "sarama DescribeTopics: "+env.topic+" ready", func() (bool, string) {
		mds, err := admin.DescribeTopics([]string{env.topic})
		if err != nil {
			return false, err.Error()
		}
		if len(mds) != 1 || mds[0].Name != env.topic {
			return false, fmt.Sprintf("%d topics in the answer", len(mds))
		}
		md := mds[0]
		if !errors.Is(md.Err, sarama.ErrNoError) {
			return false, md.Err.Error()
		}
		if len(md.Partitions) != saramaPartitions {
			return false, fmt.Sprintf("%d partitions, want %d", len(md.Partitions), saramaPartitions)
		}
		for _, p := range md.Partitions {
			if !errors.Is(p.Err, sarama.ErrNoError) || p.Leader < 0 {
				return false, fmt.Sprintf("partition %d: leader %d, %v", p.ID, p.Leader, p.Err)
			}
		}
		return true, ""
	})
}

// produce writes the records with an idempotent acks=all SyncProducer,
// some one by one and the rest in multi-record batches, and checks the
// acknowledged offsets: contiguous from 0, a key always on one partition.
func (env *saramaEnv) produce(t *testing.T) {
	t.Helper()
	cfg := saramaConfig(env.version)
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Retry.Max = 5
	cfg.Producer.Return.Successes = true
	producer, err := sarama.NewSyncProducer(env.addrs, cfg)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer (idempotent, acks=all): %v", err)
	}
	t.Cleanup(func() { producer.Close() })
	env.producer = producer

	msgs := make([]*sarama.ProducerMessage, saramaRecords)
	for i := range saramaRecords {
		msgs[i] = &sarama.ProducerMessage{
			Topic: env.topic,
			Key:   sarama.StringEncoder(fmt.Sprintf("key-%02d", i%20)),
			Value: sarama.StringEncoder(fmt.Sprintf("%s-value-%03d", env.name, i)),
			Headers: []sarama.RecordHeader{
				{Key: []byte("index"), Value: fmt.Appendf(nil, "%d", i)},
				{Key: []byte("client"), Value: []byte("sarama")},
				{Key: []byte("empty"), Value: []byte{}},
			},
			Timestamp: env.t0.Add(time.Duration(i) * time.Millisecond),
		}
	}
	for _, m := range msgs[:100] {
		if _, _, err := producer.SendMessage(m); err != nil {
			t.Fatalf("SendMessage %v: %v", m.Value, err)
		}
	}
	for i := 100; i < saramaRecords; i += 50 {
		if err := producer.SendMessages(msgs[i : i+50]); err != nil {
			t.Fatalf("SendMessages [%d, %d): %v", i, i+50, err)
		}
	}

	env.log = make(saramaLog)
	keyPartition := make(map[string]int32)
	for _, m := range msgs {
		k, v := string(m.Key.(sarama.StringEncoder)), string(m.Value.(sarama.StringEncoder))
		if p, ok := keyPartition[k]; ok && p != m.Partition {
			t.Errorf("key %s went to partitions %d and %d", k, p, m.Partition)
		}
		keyPartition[k] = m.Partition
		env.log[m.Partition] = append(env.log[m.Partition], saramaSent{key: k, value: v, headers: m.Headers, timestamp: m.Timestamp, offset: m.Offset})
	}
	for p := range int32(saramaPartitions) {
		recs := env.log[p]
		sort.Slice(recs, func(i, j int) bool { return recs[i].offset < recs[j].offset })
		for i, r := range recs {
			if r.offset != int64(i) {
				t.Fatalf("partition %d: acknowledged offsets %v, want 0..%d without gaps or duplicates", p, offsetsOf(recs), len(recs)-1)
			}
		}
		if len(recs) == 0 {
			t.Fatalf("no record hashed to partition %d (keys %v); pick other keys", p, keyPartition)
		}
	}
	t.Logf("%s: produced %d records, per partition %v", env.name, saramaRecords, env.log.ends())
}

// checkOffsetsByTime asks sarama.Client.GetOffset for each partition's
// ends and for offsets by timestamp (ListOffsets).
func (env *saramaEnv) checkOffsetsByTime(t *testing.T) {
	t.Helper()
	client, err := sarama.NewClient(env.addrs, saramaConfig(env.version))
	if err != nil {
		t.Fatalf("sarama.NewClient: %v", err)
	}
	defer client.Close()
	mid := env.t0.Add(saramaRecords / 2 * time.Millisecond)
	for p := range int32(saramaPartitions) {
		checkGetOffset(t, client, env.topic, p, sarama.OffsetOldest, "oldest", 0)
		checkGetOffset(t, client, env.topic, p, sarama.OffsetNewest, "newest", int64(len(env.log[p])))
		want := int64(-1) // Kafka answers -1 when no record is that new
		for _, r := range env.log[p] {
			if !r.timestamp.Before(mid) {
				want = r.offset
				break
			}
		}
		checkGetOffset(t, client, env.topic, p, mid.UnixMilli(), "timestamp "+mid.Format(time.StampMilli), want)
		checkGetOffset(t, client, env.topic, p, env.t0.UnixMilli(), "the first timestamp", 0)
		checkGetOffset(t, client, env.topic, p, env.t0.Add(time.Hour).UnixMilli(), "a timestamp past every record", -1)
	}
}

// groupRoundTrip runs one group with strategy: two members consume and
// commit everything from offset 0; then a single member resumes at the
// commits and receives the records produced after them (one per
// partition, with known keys) and nothing older.
func (env *saramaEnv) groupRoundTrip(t *testing.T, strategy sarama.BalanceStrategy) {
	group := fmt.Sprintf("sarama-%s-%s", env.name, strategy.Name())
	run := newSaramaGroupRun(t, env.topic, saramaPartitions, make(map[int32]int64))
	a := run.startMember(t, env.addrs, env.version, group, strategy, "A")
	bm := run.startMember(t, env.addrs, env.version, group, strategy, "B")
	gen := run.waitStable(t, "A", "B")
	checkSaramaGroupDescribed(t, env.admin, group, strategy.Name(), 2)
	run.waitConsumed(t, env.log)
	a.stop(t)
	bm.stop(t)
	run.checkNoErrors(t)
	committed := saramaCommitted(t, env.admin, group, env.topic, saramaPartitions)
	if fmt.Sprint(committed) != fmt.Sprint(env.log.ends()) {
		t.Fatalf("committed offsets after the first run (generation %d): %v, want the ends %v", gen, committed, env.log.ends())
	}
	if d := describeSaramaGroup(t, env.admin, group); d.State != "Empty" || len(d.Members) != 0 {
		t.Errorf("group %s after both members closed: state %q with %d members, want Empty with none", group, d.State, len(d.Members))
	}

	run2 := newSaramaGroupRun(t, env.topic, saramaPartitions, committed)
	c := run2.startMember(t, env.addrs, env.version, group, strategy, "C")
	run2.waitStable(t, "C")
	for p := range int32(saramaPartitions) {
		if got, ok := run2.initialOffset(p); !ok || got != committed[p] {
			t.Errorf("second run: partition %d claimed at offset %d (claimed %v), want the commit %d", p, got, ok, committed[p])
		}
	}
	for p := range int32(saramaPartitions) {
		env.produceOneMore(t, p, fmt.Sprintf("%s-after-%s-%d", env.name, strategy.Name(), p), group)
	}
	run2.waitConsumed(t, env.log)
	c.stop(t)
	run2.checkNoErrors(t)
	if got := saramaCommitted(t, env.admin, group, env.topic, saramaPartitions); fmt.Sprint(got) != fmt.Sprint(env.log.ends()) {
		t.Errorf("committed offsets after the second run: %v, want %v", got, env.log.ends())
	}
}

// produceOneMore sends one record with the key of partition p's first
// record, so it must land at the end of p.
func (env *saramaEnv) produceOneMore(t *testing.T, p int32, value, header string) {
	t.Helper()
	key := env.log[p][0].key
	m := &sarama.ProducerMessage{Topic: env.topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value),
		Headers:   []sarama.RecordHeader{{Key: []byte("after"), Value: []byte(header)}},
		Timestamp: time.Now().Truncate(time.Millisecond)}
	part, off, err := env.producer.SendMessage(m)
	if err != nil {
		t.Fatalf("SendMessage %s: %v", value, err)
	}
	if part != p || off != int64(len(env.log[p])) {
		t.Fatalf("record with key %s acknowledged at %d/%d, want %d/%d", key, part, off, p, len(env.log[p]))
	}
	env.log[p] = append(env.log[p], saramaSent{key: key, value: value, headers: m.Headers, timestamp: m.Timestamp, offset: off})
}

func offsetsOf(recs []saramaSent) []int64 {
	var out []int64
	for _, r := range recs {
		out = append(out, r.offset)
	}
	return out
}

func checkGetOffset(t *testing.T, client sarama.Client, topic string, p int32, at int64, what string, want int64) {
	t.Helper()
	got, err := client.GetOffset(topic, p, at)
	if err != nil {
		t.Errorf("GetOffset(%s, %d, %s): %v", topic, p, what, err)
	} else if got != want {
		t.Errorf("GetOffset(%s, %d, %s) = %d, want %d", topic, p, what, got, want)
	}
}

func describeSaramaGroup(t *testing.T, admin sarama.ClusterAdmin, group string) *sarama.GroupDescription {
	t.Helper()
	ds, err := admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		t.Fatalf("DescribeConsumerGroups(%s): %v", group, err)
	}
	if len(ds) != 1 || ds[0].GroupId != group || !errors.Is(ds[0].Err, sarama.ErrNoError) {
		t.Fatalf("DescribeConsumerGroups(%s): %+v", group, ds)
	}
	return ds[0]
}

// checkSaramaGroupDescribed checks what DescribeGroups reports for a
// stable group.
func checkSaramaGroupDescribed(t *testing.T, admin sarama.ClusterAdmin, group, protocol string, members int) {
	t.Helper()
	d := describeSaramaGroup(t, admin, group)
	if d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != protocol || len(d.Members) != members {
		t.Errorf("DescribeConsumerGroups(%s): state %q, protocol type %q, protocol %q, %d members; want Stable, consumer, %s, %d",
			group, d.State, d.ProtocolType, d.Protocol, len(d.Members), protocol, members)
	}
	for id, m := range d.Members {
		a, err := m.GetMemberAssignment()
		if err != nil || a == nil || len(a.Topics) != 1 {
			t.Errorf("DescribeConsumerGroups(%s): member %s assignment %+v (%v), want one topic", group, id, a, err)
		}
	}
}

func saramaCommitted(t *testing.T, admin sarama.ClusterAdmin, group, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	ps := make([]int32, partitions)
	for p := range partitions {
		ps[p] = p
	}
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: ps})
	if err != nil {
		t.Fatalf("ListConsumerGroupOffsets(%s): %v", group, err)
	}
	if !errors.Is(resp.Err, sarama.ErrNoError) {
		t.Fatalf("ListConsumerGroupOffsets(%s): %v", group, resp.Err)
	}
	out := make(map[int32]int64)
	for _, p := range ps {
		blk := resp.GetBlock(topic, p)
		if blk == nil || !errors.Is(blk.Err, sarama.ErrNoError) {
			t.Fatalf("ListConsumerGroupOffsets(%s): %s/%d: %+v", group, topic, p, blk)
		}
		out[p] = blk.Offset
	}
	return out
}

// saramaGroupRun follows the members of one consumer group run. Each
// generation's claims are held back until every expected member is in it
// with disjoint claims covering every partition, so records are consumed
// only in the final, stable generation and each exactly once.
type saramaGroupRun struct {
	topic      string
	partitions int32
	start      map[int32]int64 // where each partition's consumption must begin

	mu       sync.Mutex
	sessions map[string]*saramaSession           // member label -> its latest session; guarded by mu
	release  map[int32]chan struct{}             // generation -> closed once released; guarded by mu
	initial  map[int32]map[int32]int64           // generation -> partition -> claim's initial offset; guarded by mu
	consumed map[int32][]*sarama.ConsumerMessage // partition -> records in offset order; guarded by mu
	errs     []string                            // client errors and misdeliveries; guarded by mu
}

type saramaSession struct {
	memberID   string
	generation int32
	claims     []int32
	ended      bool
}

func newSaramaGroupRun(t *testing.T, topic string, partitions int32, start map[int32]int64) *saramaGroupRun {
	return &saramaGroupRun{
		topic: topic, partitions: partitions, start: start,
		sessions: make(map[string]*saramaSession),
		release:  make(map[int32]chan struct{}),
		initial:  make(map[int32]map[int32]int64),
		consumed: make(map[int32][]*sarama.ConsumerMessage),
	}
}

func (r *saramaGroupRun) addErr(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *saramaGroupRun) gate(gen int32) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.release[gen]
	if !ok {
		ch = make(chan struct{})
		r.release[gen] = ch
	}
	return ch
}

func (r *saramaGroupRun) initialOffset(p int32) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gen int32 = -1
	for g, ch := range r.release {
		select {
		case <-ch:
			gen = max(gen, g)
		default:
		}
	}
	off, ok := r.initial[gen][p]
	return off, ok
}

// stable returns the generation in which exactly the given members hold
// every partition between them, if there is one.
func (r *saramaGroupRun) stable(labels ...string) (int32, bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var desc []string
	for l, s := range r.sessions {
		desc = append(desc, fmt.Sprintf("%s: member %s generation %d claims %v ended %v", l, s.memberID, s.generation, s.claims, s.ended))
	}
	sort.Strings(desc)
	why := "sessions: " + strings.Join(desc, "; ")
	var gen int32 = -1
	var all []int32
	for _, l := range labels {
		s := r.sessions[l]
		if s == nil || s.ended || (gen >= 0 && s.generation != gen) || len(s.claims) == 0 {
			return 0, false, why
		}
		gen = s.generation
		all = append(all, s.claims...)
	}
	slices.Sort(all)
	for i, p := range all {
		if p != int32(i) {
			return 0, false, why
		}
	}
	return gen, len(all) == int(r.partitions), why
}

// waitStable waits for a stable generation of the given members, checks
// the claims' starting offsets, and lets that generation consume.
func (r *saramaGroupRun) waitStable(t *testing.T, labels ...string) int32 {
	t.Helper()
	var gen int32
	eventually(t, 20*time.Second, fmt.Sprintf("members %v share the partitions in one generation", labels), func() (bool, string) {
		g, ok, why := r.stable(labels...)
		if !ok {
			return false, why
		}
		r.mu.Lock()
		n := len(r.initial[g])
		r.mu.Unlock()
		gen = g
		return n == int(r.partitions), fmt.Sprintf("%s; %d claims started", why, n)
	})
	close(r.gate(gen))
	return gen
}

// waitConsumed waits until every partition was consumed from its start to
// the end of log, then compares each record.
func (r *saramaGroupRun) waitConsumed(t *testing.T, log saramaLog) {
	t.Helper()
	ends := log.ends()
	eventually(t, 20*time.Second, "the group consumes every record", func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.errs) > 0 {
			t.Fatalf("consumer group errors: %s", strings.Join(r.errs, "; "))
		}
		var progress []string
		done := true
		for p := range r.partitions {
			next := r.start[p] + int64(len(r.consumed[p]))
			progress = append(progress, fmt.Sprintf("%d: %d of %d", p, next, ends[p]))
			if next != ends[p] {
				done = false
			}
		}
		return done, "consumed up to " + strings.Join(progress, ", ")
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.partitions {
		for _, m := range r.consumed[p] {
			want := log[p][m.Offset]
			if err := sameSaramaRecord(want, m); err != nil {
				t.Errorf("%s/%d at offset %d: %v", m.Topic, p, m.Offset, err)
			}
		}
	}
}

func sameSaramaRecord(want saramaSent, got *sarama.ConsumerMessage) error {
	if string(got.Key) != want.key || string(got.Value) != want.value {
		return fmt.Errorf("key %q value %q, produced key %q value %q", got.Key, got.Value, want.key, want.value)
	}
	if !got.Timestamp.Equal(want.timestamp) {
		return fmt.Errorf("timestamp %v, produced %v", got.Timestamp, want.timestamp)
	}
	var gh, wh []string
	for _, h := range got.Headers {
		gh = append(gh, fmt.Sprintf("%s=%q", h.Key, h.Value))
	}
	for _, h := range want.headers {
		wh = append(wh, fmt.Sprintf("%s=%q", h.Key, h.Value))
	}
	if fmt.Sprint(gh) != fmt.Sprint(wh) {
		return fmt.Errorf("headers %v, produced %v", gh, wh)
	}
	return nil
}

func (r *saramaGroupRun) checkNoErrors(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		t.Errorf("consumer group errors: %s", strings.Join(r.errs, "; "))
	}
}

// saramaHandler is one member's sarama.ConsumerGroupHandler.
type saramaHandler struct {
	run   *saramaGroupRun
	label string
}

func (h saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	r := h.run
	claims := slices.Clone(s.Claims()[r.topic])
	slices.Sort(claims)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sessions[h.label] = &saramaSession{memberID: s.MemberID(), generation: s.GenerationID(), claims: claims}
	return nil
}

func (h saramaHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	r := h.run
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur := r.sessions[h.label]; cur != nil && cur.generation == s.GenerationID() {
		cur.ended = true
	}
	return nil
}

func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	r := h.run
	gen, p := s.GenerationID(), c.Partition()
	r.mu.Lock()
	if r.initial[gen] == nil {
		r.initial[gen] = make(map[int32]int64)
	}
	r.initial[gen][p] = c.InitialOffset()
	r.mu.Unlock()
	select {
	case <-r.gate(gen):
	case <-s.Context().Done():
		return nil
	}
	sinceCommit := 0
	for {
		select {
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			r.mu.Lock()
			next := r.start[p] + int64(len(r.consumed[p]))
			if m.Offset != next {
				r.errs = append(r.errs, fmt.Sprintf("member %s generation %d: received %d/%d, want offset %d (from %d, in order, once)", h.label, gen, p, m.Offset, next, r.start[p]))
			} else {
				r.consumed[p] = append(r.consumed[p], m)
			}
			r.mu.Unlock()
			s.MarkMessage(m, "")
			sinceCommit++
			if sinceCommit >= 25 || m.Offset+1 >= c.HighWaterMarkOffset() {
				s.Commit()
				sinceCommit = 0
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

// saramaMember is one running sarama.ConsumerGroup.
type saramaMember struct {
	label  string
	group  sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (r *saramaGroupRun) startMember(t *testing.T, addrs []string, version sarama.KafkaVersion, group string, strategy sarama.BalanceStrategy, label string) *saramaMember {
	t.Helper()
	cfg := saramaConfig(version)
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	g, err := sarama.NewConsumerGroup(addrs, group, cfg)
	if err != nil {
		t.Fatalf("sarama.NewConsumerGroup(%s, %s): %v", group, strategy.Name(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{label: label, group: g, cancel: cancel, done: make(chan struct{})}
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for err := range g.Errors() {
			r.addErr("member %s: %v", label, err)
		}
	}()
	go func() {
		defer close(m.done)
		h := saramaHandler{run: r, label: label}
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{r.topic}, h); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) || ctx.Err() != nil {
					return // stopped: a session cut by the cancel is no error
				}
				r.addErr("member %s: Consume: %v", label, err)
				select { // do not spin on a persistent error
				case <-ctx.Done():
				case <-time.After(pollInterval):
				}
			}
		}
	}()
	t.Cleanup(func() {
		m.stop(t)
		<-errsDone
	})
	return m
}

// stop ends the member's Consume loop and closes it (LeaveGroup).
func (m *saramaMember) stop(t *testing.T) {
	m.once.Do(func() {
		m.cancel()
		select {
		case <-m.done:
		case <-time.After(30 * time.Second):
			t.Errorf("member %s: Consume still running 30s after cancel", m.label)
		}
		if err := m.group.Close(); err != nil {
			t.Errorf("member %s: close: %v", m.label, err)
		}
	})
}
