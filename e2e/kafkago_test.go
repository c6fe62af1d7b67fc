package e2e

// Client compatibility with segmentio/kafka-go, which sends fixed, old
// request versions (as real Kafka clients expect): topics created over a kafka.Conn, an
// acks=all Writer and a Writer with its default acks=0, a group Reader that
// consumes and commits everything, a second group Reader that resumes at
// the commits, and partition Readers positioned by SetOffsetAt(time).
//
// Invariant: the acks=all topic holds exactly what kafkaGoEnv.log records
// (the Writer's Completion callback reports each record's partition and
// offset), so every record read is compared with what was written there.

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

const (
	kafkaGoPartitions = 3
	kafkaGoRecords    = 300
)

// kafkaGoSent is one record as written, with where the broker put it.
type kafkaGoSent struct {
	key, value string
	headers    []kafka.Header
	time       time.Time
	offset     int64
}

// kafkaGoLog is what a topic must hold: per partition, every acknowledged
// record at index == offset.
type kafkaGoLog map[int][]kafkaGoSent

func (l kafkaGoLog) ends() map[int]int64 {
	out := make(map[int]int64)
	for p, recs := range l {
		out[p] = int64(len(recs))
	}
	return out
}

// kafkaGoErrors collects what kafka-go's error loggers report, for failure
// messages and the test log.
type kafkaGoErrors struct {
	mu    sync.Mutex
	lines []string // guarded by mu
}

func (e *kafkaGoErrors) logger(prefix string) kafka.LoggerFunc {
	return func(format string, args ...any) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.lines = append(e.lines, prefix+": "+fmt.Sprintf(format, args...))
	}
}

func (e *kafkaGoErrors) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.lines[max(0, len(e.lines)-20):], "\n")
}

func kafkaGoMessages(prefix string, n int, t0 time.Time) []kafka.Message {
	msgs := make([]kafka.Message, n)
	for i := range n {
		msgs[i] = kafka.Message{
			Key:   fmt.Appendf(nil, "key-%02d", i%20),
			Value: fmt.Appendf(nil, "%s-value-%03d", prefix, i),
			Headers: []kafka.Header{
				{Key: "index", Value: []byte(strconv.Itoa(i))},
				{Key: "client", Value: []byte("kafka-go")},
			},
			Time: t0.Add(time.Duration(i) * time.Millisecond),
		}
	}
	return msgs
}

func sameKafkaGoRecord(want kafkaGoSent, got kafka.Message) error {
	if string(got.Key) != want.key || string(got.Value) != want.value {
		return fmt.Errorf("key %q value %q, written key %q value %q", got.Key, got.Value, want.key, want.value)
	}
	if !got.Time.Equal(want.time) {
		return fmt.Errorf("time %v, written %v", got.Time, want.time)
	}
	var gh, wh []string
	for _, h := range got.Headers {
		gh = append(gh, fmt.Sprintf("%s=%q", h.Key, h.Value))
	}
	for _, h := range want.headers {
		wh = append(wh, fmt.Sprintf("%s=%q", h.Key, h.Value))
	}
	if fmt.Sprint(gh) != fmt.Sprint(wh) {
		return fmt.Errorf("headers %v, written %v", gh, wh)
	}
	return nil
}

// kafkaGoEnv is the broker, topics and clients of TestKafkaGoClient. The
// test goroutine owns it, except log: the acks=all Writer's Completion
// callback appends to it under logMu while WriteMessages runs, and the
// test goroutine reads it only between writes (WriteMessages waits for
// Completion).
type kafkaGoEnv struct {
	addr       string
	topic      string // written with acks=all, consumed by the group
	topicAcks0 string // written with the default acks=0
	group      string
	client     *kafka.Client
	t0         time.Time // time of record i is t0 + i ms
	writer     *kafka.Writer

	logMu sync.Mutex
	log   kafkaGoLog // written under logMu by Completion; see above

	writerErrs, readerErrs kafkaGoErrors
}

func TestKafkaGoClient(t *testing.T) {
	b := startBroker(t, brokerOptions{noAutoCreate: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := &kafkaGoEnv{
		addr: b.kafkaAddr, topic: "kafkago", topicAcks0: "kafkago-acks0", group: "kafkago-grp",
		client: &kafka.Client{Addr: kafka.TCP(b.kafkaAddr), Timeout: 10 * time.Second},
		t0:     time.Now().Add(-time.Minute).Truncate(time.Millisecond),
		log:    make(kafkaGoLog),
	}
	env.createTopics(ctx, t)
	env.writeAcksAll(ctx, t)
	env.writeAcks0(ctx, t)
	committed := env.consumeGroup(ctx, t)
	env.resumeGroup(ctx, t, committed)
	env.checkSetOffsetAt(ctx, t)
	for _, e := range []*kafkaGoErrors{&env.writerErrs, &env.readerErrs} {
		if s := e.String(); s != "" {
			t.Logf("kafka-go reported:\n%s", s)
		}
	}
	b.Alive(t)
}

// createTopics creates both topics over the controller's kafka.Conn and
// waits until every partition has a leader.
func (env *kafkaGoEnv) createTopics(ctx context.Context, t *testing.T) {
	t.Helper()
	conn, err := kafka.DialContext(ctx, "tcp", env.addr)
	if err != nil {
		t.Fatalf("kafka.Dial %s: %v", env.addr, err)
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		t.Fatalf("kafka.Conn.Controller: %v", err)
	}
	ctrlConn, err := kafka.DialContext(ctx, "tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		t.Fatalf("dial the controller %s:%d: %v", ctrl.Host, ctrl.Port, err)
	}
	defer ctrlConn.Close()
	if err := ctrlConn.CreateTopics(
		kafka.TopicConfig{Topic: env.topic, NumPartitions: kafkaGoPartitions, ReplicationFactor: 1},
		kafka.TopicConfig{Topic: env.topicAcks0, NumPartitions: kafkaGoPartitions, ReplicationFactor: 1},
	); err != nil {
		t.Fatalf("kafka.Conn.CreateTopics(%s, %s): %v", env.topic, env.topicAcks0, err)
	}
	for _, tp := range []string{env.topic, env.topicAcks0} {
		eventually(t, 20*time.Second, "kafka-go ReadPartitions("+tp+")", func() (bool, string) {
			ps, err := conn.ReadPartitions(tp)
			if err != nil {
				return false, err.Error()
			}
			var ids []int
			for _, p := range ps {
				if p.Leader.ID < 0 || p.Leader.Host == "" {
					return false, fmt.Sprintf("partition %d without a leader", p.ID)
				}
				ids = append(ids, p.ID)
			}
			sort.Ints(ids)
			return fmt.Sprint(ids) == "[0 1 2]", fmt.Sprintf("partitions %v", ids)
		})
	}
}

// writeAcksAll writes the records with an acks=all Writer (kept for later
// writes) and checks where they went: offsets contiguous from 0, a key
// always on one partition.
func (env *kafkaGoEnv) writeAcksAll(ctx context.Context, t *testing.T) {
	t.Helper()
	env.writer = &kafka.Writer{
		Addr:         kafka.TCP(env.addr),
		Topic:        env.topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond,
		ErrorLogger:  env.writerErrs.logger("acks=all writer"),
		Completion: func(msgs []kafka.Message, err error) {
			if err != nil {
				return // WriteMessages returns it
			}
			env.logMu.Lock()
			defer env.logMu.Unlock()
			for _, m := range msgs {
				env.log[m.Partition] = append(env.log[m.Partition], kafkaGoSent{key: string(m.Key), value: string(m.Value), headers: m.Headers, time: m.Time, offset: m.Offset})
			}
		},
	}
	t.Cleanup(func() { env.writer.Close() })
	if err := env.writer.WriteMessages(ctx, kafkaGoMessages("acks-all", kafkaGoRecords, env.t0)...); err != nil {
		t.Fatalf("acks=all Writer.WriteMessages(%d): %v\nwriter log:\n%s", kafkaGoRecords, err, &env.writerErrs)
	}
	env.logMu.Lock()
	defer env.logMu.Unlock()
	keyPartition := make(map[string]int)
	for p := range kafkaGoPartitions {
		recs := env.log[p]
		sort.Slice(recs, func(i, j int) bool { return recs[i].offset < recs[j].offset })
		for i, r := range recs {
			if r.offset != int64(i) {
				t.Fatalf("partition %d: record %d acknowledged at offset %d, want offsets 0..%d without gaps or duplicates", p, i, r.offset, len(recs)-1)
			}
			if q, ok := keyPartition[r.key]; ok && q != p {
				t.Errorf("key %s written to partitions %d and %d", r.key, q, p)
			}
			keyPartition[r.key] = p
		}
		if len(recs) == 0 {
			t.Fatalf("no record hashed to partition %d; pick other keys", p)
		}
	}
	t.Logf("acks=all writer: %d records, per partition %v", kafkaGoRecords, env.log.ends())
}

// writeAcks0 writes the records with a Writer left at its default acks=0:
// nothing is answered, so it polls the end offsets until they account for
// every record, then reads them all back.
func (env *kafkaGoEnv) writeAcks0(ctx context.Context, t *testing.T) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(env.addr), Topic: env.topicAcks0, Balancer: &kafka.Hash{},
		BatchTimeout: 10 * time.Millisecond, ErrorLogger: env.writerErrs.logger("acks=0 writer")}
	defer w.Close()
	if w.RequiredAcks != kafka.RequireNone {
		t.Fatalf("default Writer RequiredAcks = %v, want RequireNone (acks=0)", w.RequiredAcks)
	}
	if err := w.WriteMessages(ctx, kafkaGoMessages("acks-0", kafkaGoRecords, env.t0)...); err != nil {
		t.Fatalf("acks=0 Writer.WriteMessages(%d): %v\nwriter log:\n%s", kafkaGoRecords, err, &env.writerErrs)
	}
	var ends map[int]int64
	eventually(t, 20*time.Second, "the acks=0 records arrive", func() (bool, string) {
		ends = kafkaGoEndOffsets(ctx, t, env.client, env.topicAcks0, kafkaGoPartitions)
		sum := int64(0)
		for _, e := range ends {
			sum += e
		}
		return sum == kafkaGoRecords, fmt.Sprintf("end offsets %v (sum %d), want %d records", ends, sum, kafkaGoRecords)
	})
	checkKafkaGoAcks0(ctx, t, env.addr, env.topicAcks0, kafkaGoPartitions, ends, kafkaGoRecords, env.t0)
}

func (env *kafkaGoEnv) groupReader(name string) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{env.addr},
		GroupID:           env.group,
		Topic:             env.topic,
		MinBytes:          1,
		MaxBytes:          1 << 20,
		MaxWait:           200 * time.Millisecond,
		HeartbeatInterval: 300 * time.Millisecond,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  10 * time.Second,
		JoinGroupBackoff:  200 * time.Millisecond,
		CommitInterval:    0, // CommitMessages commits synchronously
		StartOffset:       kafka.FirstOffset,
		ErrorLogger:       env.readerErrs.logger(name),
	})
}

// consumeGroup reads every acks=all record with a group Reader, in order
// per partition, commits them in chunks, checks the commits and closes
// the Reader. It returns the committed offsets.
func (env *kafkaGoEnv) consumeGroup(ctx context.Context, t *testing.T) map[int]int64 {
	t.Helper()
	r := env.groupReader("group reader 1")
	defer r.Close()
	consumed := make(map[int]int64) // partition -> records read
	var pending []kafka.Message
	for n := range kafkaGoRecords {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("group reader 1: FetchMessage after %d of %d records: %v\nreader log:\n%s", n, kafkaGoRecords, err, &env.readerErrs)
		}
		if m.Topic != env.topic || m.Partition < 0 || m.Partition >= kafkaGoPartitions || m.Offset != consumed[m.Partition] {
			t.Fatalf("group reader 1: got %s/%d/%d, want partition offset %d next (in order, once)", m.Topic, m.Partition, m.Offset, consumed[m.Partition])
		}
		if err := sameKafkaGoRecord(env.log[m.Partition][m.Offset], m); err != nil {
			t.Errorf("group reader 1: %d/%d: %v", m.Partition, m.Offset, err)
		}
		consumed[m.Partition]++
		if pending = append(pending, m); len(pending) == 50 || n == kafkaGoRecords-1 {
			if err := r.CommitMessages(ctx, pending...); err != nil {
				t.Fatalf("group reader 1: CommitMessages(%d) after %d records: %v\nreader log:\n%s", len(pending), n+1, err, &env.readerErrs)
			}
			pending = nil
		}
	}
	ends := env.log.ends()
	if fmt.Sprint(consumed) != fmt.Sprint(ends) {
		t.Errorf("group reader 1 read %v records per partition, want %v", consumed, ends)
	}
	if got := kafkaGoCommitted(ctx, t, env.client, env.group, env.topic, kafkaGoPartitions); fmt.Sprint(got) != fmt.Sprint(ends) {
		t.Fatalf("committed offsets after group reader 1: %v, want the ends %v", got, ends)
	}
	if err := r.Close(); err != nil {
		t.Errorf("group reader 1: Close: %v", err)
	}
	return ends
}

// resumeGroup writes one record per partition past the commits (with a
// key known to land there) and checks that a new group Reader reads
// exactly those: it starts at the commits.
func (env *kafkaGoEnv) resumeGroup(ctx context.Context, t *testing.T, committed map[int]int64) {
	t.Helper()
	var after []kafka.Message
	for p := range kafkaGoPartitions {
		after = append(after, kafka.Message{Key: []byte(env.log[p][0].key), Value: fmt.Appendf(nil, "after-commit-%d", p),
			Headers: []kafka.Header{{Key: "after", Value: []byte("commit")}}, Time: time.Now().Truncate(time.Millisecond)})
	}
	if err := env.writer.WriteMessages(ctx, after...); err != nil {
		t.Fatalf("acks=all Writer: write after the commit: %v", err)
	}
	for p := range kafkaGoPartitions {
		if len(env.log[p]) != int(committed[p])+1 {
			t.Fatalf("partition %d: %d records after writing one more past the commit %d", p, len(env.log[p]), committed[p])
		}
	}
	r := env.groupReader("group reader 2")
	defer r.Close()
	next := make(map[int]int64)
	for p, o := range committed {
		next[p] = o
	}
	for range kafkaGoPartitions {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("group reader 2: FetchMessage: %v\nreader log:\n%s", err, &env.readerErrs)
		}
		if m.Partition < 0 || m.Partition >= kafkaGoPartitions || m.Offset != next[m.Partition] {
			t.Fatalf("group reader 2 read %d/%d (%q), want the records at the commits %v", m.Partition, m.Offset, m.Value, committed)
		}
		if err := sameKafkaGoRecord(env.log[m.Partition][m.Offset], m); err != nil {
			t.Errorf("group reader 2: %d/%d: %v", m.Partition, m.Offset, err)
		}
		next[m.Partition]++
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("group reader 2: CommitMessages: %v", err)
		}
	}
	if got := kafkaGoCommitted(ctx, t, env.client, env.group, env.topic, kafkaGoPartitions); fmt.Sprint(got) != fmt.Sprint(env.log.ends()) {
		t.Errorf("committed offsets after group reader 2: %v, want %v", got, env.log.ends())
	}
	if err := r.Close(); err != nil {
		t.Errorf("group reader 2: Close: %v", err)
	}
}

// checkSetOffsetAt positions a Reader without a group on each partition at
// the middle timestamp and reads the first record at or after it.
func (env *kafkaGoEnv) checkSetOffsetAt(ctx context.Context, t *testing.T) {
	t.Helper()
	mid := env.t0.Add(kafkaGoRecords / 2 * time.Millisecond)
	for p := range kafkaGoPartitions {
		want := env.log[p][len(env.log[p])-1]
		for _, r := range env.log[p] {
			if !r.time.Before(mid) {
				want = r
				break
			}
		}
		if want.time.Before(mid) {
			t.Fatalf("partition %d: no record at or after %v", p, mid)
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{env.addr}, Topic: env.topic, Partition: p,
			MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond, ErrorLogger: env.readerErrs.logger(fmt.Sprintf("partition reader %d", p))})
		if err := r.SetOffsetAt(ctx, mid); err != nil {
			r.Close()
			t.Fatalf("partition %d: SetOffsetAt(%v): %v", p, mid, err)
		}
		if got := r.Offset(); got != want.offset {
			t.Errorf("partition %d: SetOffsetAt(%v) positioned at %d, want %d", p, mid.Format(time.StampMilli), got, want.offset)
		}
		m, err := r.ReadMessage(ctx)
		r.Close()
		if err != nil {
			t.Fatalf("partition %d: ReadMessage after SetOffsetAt: %v\nreader log:\n%s", p, err, &env.readerErrs)
		}
		if m.Offset != want.offset {
			t.Errorf("partition %d: first record after SetOffsetAt(%v) is at %d, want %d", p, mid.Format(time.StampMilli), m.Offset, want.offset)
		} else if err := sameKafkaGoRecord(want, m); err != nil {
			t.Errorf("partition %d at %d: %v", p, m.Offset, err)
		}
	}
}

// kafkaGoEndOffsets lists each partition's end offset with kafka.Client.
func kafkaGoEndOffsets(ctx context.Context, t *testing.T, client *kafka.Client, topic string, partitions int) map[int]int64 {
	t.Helper()
	var reqs []kafka.OffsetRequest
	for p := range partitions {
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		t.Fatalf("kafka.Client.ListOffsets(%s): %v", topic, err)
	}
	out := make(map[int]int64)
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			t.Fatalf("kafka.Client.ListOffsets(%s): partition %d: %v", topic, po.Partition, po.Error)
		}
		out[po.Partition] = po.LastOffset
	}
	if len(out) != partitions {
		t.Fatalf("kafka.Client.ListOffsets(%s): %d partitions answered, want %d", topic, len(out), partitions)
	}
	return out
}

// kafkaGoCommitted fetches the group's committed offsets with kafka.Client.
func kafkaGoCommitted(ctx context.Context, t *testing.T, client *kafka.Client, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	var ps []int
	for p := range partitions {
		ps = append(ps, p)
	}
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		t.Fatalf("kafka.Client.OffsetFetch(%s): %v", group, err)
	}
	if resp.Error != nil {
		t.Fatalf("kafka.Client.OffsetFetch(%s): %v", group, resp.Error)
	}
	out := make(map[int]int64)
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("kafka.Client.OffsetFetch(%s): partition %d: %v", group, p.Partition, p.Error)
		}
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// checkKafkaGoAcks0 reads every partition of the acks=0 topic to its end:
// each record written exactly once, a key always on one partition, and
// each partition in write order.
func checkKafkaGoAcks0(ctx context.Context, t *testing.T, addr string, topic string, partitions int, ends map[int]int64, records int, t0 time.Time) {
	t.Helper()
	written := kafkaGoMessages("acks-0", records, t0)
	seen := make(map[string]bool)
	keyPartition := make(map[string]int)
	for p := range partitions {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: p, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond})
		last := -1
		for off := int64(0); off < ends[p]; off++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("acks=0 topic: partition %d: ReadMessage at %d of %d: %v", p, off, ends[p], err)
			}
			idx, err := strconv.Atoi(strings.TrimPrefix(string(m.Value), "acks-0-value-"))
			if m.Offset != off || err != nil || idx < 0 || idx >= records {
				r.Close()
				t.Fatalf("acks=0 topic: partition %d: read %q at offset %d, want a written record at %d", p, m.Value, m.Offset, off)
			}
			want := kafkaGoSent{key: string(written[idx].Key), value: string(written[idx].Value), headers: written[idx].Headers, time: written[idx].Time}
			if err := sameKafkaGoRecord(want, m); err != nil {
				t.Errorf("acks=0 topic: %d/%d: %v", p, off, err)
			}
			if seen[want.value] || idx <= last {
				t.Errorf("acks=0 topic: %d/%d holds record %d after record %d (duplicate or out of write order)", p, off, idx, last)
			}
			if q, ok := keyPartition[want.key]; ok && q != p {
				t.Errorf("acks=0 topic: key %s on partitions %d and %d", want.key, q, p)
			}
			seen[want.value], keyPartition[want.key], last = true, p, idx
		}
		r.Close()
	}
	if len(seen) != records {
		t.Errorf("acks=0 topic: %d distinct records read, want %d", len(seen), records)
	}
}
