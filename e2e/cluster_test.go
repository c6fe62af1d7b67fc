package e2e

// This file owns the three-broker harness of the replication tests: three
// sluiced processes on free loopback ports (AZs a, b, c) whose embedded
// etcd members form one etcd cluster, as deploy/cluster.sh starts them;
// killing (SIGKILL), pausing (SIGSTOP/SIGCONT) and restarting one of them;
// asking one chosen broker for Metadata, Produce or Fetch (kgo routes by
// the metadata and cannot be told to ask a follower); and reading one
// broker's copy of a partition below its high watermark.
//
// Invariant: every broker of a cluster is resumed if paused and stopped
// (all at once, so no etcd member waits alone for a quorum) or already
// dead when its test's cleanup returns; a failed test prints each log tail.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// clusterSize is the number of brokers (and etcd members) of a cluster.
const clusterSize = 3

// cluster is three sluiced processes forming one Sluice cluster. nodes[i]
// is node id i+1 in AZ "a"+i.
type cluster struct {
	t     testing.TB
	nodes []*broker

	mu     sync.Mutex
	paused map[int32]bool        // guarded by mu: SIGSTOPped and not yet SIGCONTed
	direct map[int32]*kgo.Client // guarded by mu: one client per node, pinned to it
}

// startAttempts bounds the tries to start a cluster: a port picked free
// may be taken (by an outgoing connection's ephemeral port) before the
// broker binds it.
const startAttempts = 3

// startCluster starts three brokers with one embedded etcd cluster and
// waits until each answers /readyz and lists all three in its Metadata.
// extraArgs go to every broker. A start that fails because a port was
// taken meanwhile is retried on fresh ports.
func startCluster(t testing.TB, extraArgs ...string) *cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := tryStartCluster(t, extraArgs)
		if err == nil {
			return c
		}
		if attempt < startAttempts && errors.Is(err, errPortTaken) {
			t.Logf("start the cluster, attempt %d: %v; again on fresh ports", attempt, err)
			continue
		}
		t.Fatalf("start the cluster (attempt %d): %v", attempt, err)
	}
}

var errPortTaken = errors.New("a port picked free was taken")

func tryStartCluster(t testing.TB, extraArgs []string) (*cluster, error) {
	t.Helper()
	c := &cluster{t: t, paused: map[int32]bool{}, direct: map[int32]*kgo.Client{}}
	ports := freePorts(t, 5*clusterSize) // at once, so no two are the same
	var initial []string
	for i := range clusterSize {
		dir := t.TempDir()
		b := &broker{
			t: t,
			opts: brokerOptions{
				nodeID:            i + 1,
				az:                string(rune('a' + i)),
				defaultPartitions: 1,
			},
			dataDir:        filepath.Join(dir, "data"),
			logPath:        filepath.Join(dir, "sluiced.log"),
			kafkaAddr:      ports[5*i],
			httpAddr:       ports[5*i+1],
			etcdClientAddr: ports[5*i+2],
			etcdPeerAddr:   ports[5*i+3],

			interBrokerAddr: ports[5*i+4],
		}
		if err := os.MkdirAll(b.dataDir, 0o755); err != nil {
			t.Fatalf("make data dir: %v", err)
		}
		initial = append(initial, fmt.Sprintf("%d=http://%s", i+1, b.etcdPeerAddr))
		c.nodes = append(c.nodes, b)
	}
	// Every broker of a cluster reads the objects the others upload: one
	// shared store (a directory here; S3 in the tiering tests).
	objects := "file://" + t.TempDir()
	for _, b := range c.nodes {
		b.opts.extraArgs = append([]string{"--etcd-initial-cluster", strings.Join(initial, ","), "--object-store", objects}, extraArgs...)
	}
	t.Cleanup(c.shutdown)
	// The etcd members wait for each other's quorum, so all three start
	// before any is waited for.
	for _, b := range c.nodes {
		b.launch()
	}
	for _, b := range c.nodes {
		if err := b.awaitReady(); err != nil {
			for _, o := range c.nodes {
				if o.running() {
					o.Kill()
				}
			}
			for _, o := range c.nodes {
				if lines := c.grepLog(int32(o.opts.nodeID), "address already in use"); len(lines) > 0 {
					return nil, fmt.Errorf("%w: broker %d: %s", errPortTaken, o.opts.nodeID, lines[0])
				}
			}
			return nil, err
		}
	}
	for _, b := range c.nodes {
		id := int32(b.opts.nodeID)
		eventually(t, defaultTimeout, fmt.Sprintf("broker %d lists the three brokers and a controller", id), func() (bool, string) {
			md, err := c.metadata(id)
			if err != nil {
				return false, err.Error()
			}
			return len(md.Brokers) == clusterSize && md.ControllerID > 0,
				fmt.Sprintf("brokers %v, controller %d", brokerIDs(md), md.ControllerID)
		})
	}
	return c, nil
}

// awaitReady is waitReady returning its failure instead of failing the test.
func (b *broker) awaitReady() error {
	b.mu.Lock()
	exited := b.exited
	b.mu.Unlock()
	deadline := time.Now().Add(readyTimeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	url := "http://" + b.httpAddr + "/readyz"
	last := ""
	for {
		resp, err := hc.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker %d not ready after %v (last /readyz: %s)", b.opts.nodeID, readyTimeout, last)
		}
		select {
		case <-exited:
			return fmt.Errorf("broker %d exited before /readyz answered 200: %w", b.opts.nodeID, b.exitErr())
		case <-time.After(pollInterval):
		}
	}
}

// shutdown resumes paused brokers, stops every running one at once with
// SIGTERM (each must exit 0), and prints the log tails if the test failed.
func (c *cluster) shutdown() {
	c.mu.Lock()
	for id := range c.paused {
		_ = c.node(id).signal(syscall.SIGCONT)
	}
	c.paused = map[int32]bool{}
	for _, cl := range c.direct {
		cl.Close()
	}
	c.direct = map[int32]*kgo.Client{}
	c.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, b := range c.nodes {
		if !b.running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.stop()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.t.Errorf("broker %d: clean shutdown on SIGTERM: %v", i+1, err)
		}
	}
	for _, b := range c.nodes {
		if c.t.Failed() {
			b.printLogTail()
		}
		b.mu.Lock()
		if b.logFile != nil {
			b.logFile.Close()
			b.logFile = nil
		}
		b.mu.Unlock()
	}
}

// node is the broker with the given node id.
func (c *cluster) node(id int32) *broker {
	if id < 1 || int(id) > len(c.nodes) {
		c.t.Fatalf("no broker with node id %d", id)
	}
	return c.nodes[id-1]
}

// ids lists the node ids, except those given.
func (c *cluster) ids(except ...int32) []int32 {
	var out []int32
	for i := range c.nodes {
		if id := int32(i + 1); !slices.Contains(except, id) {
			out = append(out, id)
		}
	}
	return out
}

// seeds is every broker's Kafka address.
func (c *cluster) seeds() []string {
	var out []string
	for _, b := range c.nodes {
		out = append(out, b.kafkaAddr)
	}
	return out
}

// client is a franz-go client of the whole cluster, closed at cleanup.
func (c *cluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	all := append([]kgo.Opt{
		kgo.SeedBrokers(c.seeds()...),
		kgo.ClientID("sluice-e2e-cluster"),
		kgo.RetryTimeout(30 * time.Second),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		c.t.Fatalf("kgo.NewClient: %v", err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic with replication factor 3 and waits until
// every partition has a leader.
func (c *cluster) createTopic(topic string, partitions int32) {
	c.t.Helper()
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, clusterSize, nil, topic)
	if err != nil {
		c.t.Fatalf("create topic %q (%d partitions, replication factor %d): %v %s", topic, partitions, clusterSize, err, resp.ErrMessage)
	}
	for p := range partitions {
		c.waitLeader(topic, p, nil, defaultTimeout)
	}
}

// kill sends SIGKILL to node id and waits for it to be gone.
func (c *cluster) kill(id int32) {
	c.t.Helper()
	c.node(id).Kill()
	c.mu.Lock()
	delete(c.paused, id)
	c.mu.Unlock()
}

// pause stops node id with SIGSTOP: its process, embedded etcd member
// included, is frozen with its sockets open.
func (c *cluster) pause(id int32) {
	c.t.Helper()
	if err := c.node(id).signal(syscall.SIGSTOP); err != nil {
		c.t.Fatalf("broker %d: SIGSTOP: %v", id, err)
	}
	c.mu.Lock()
	c.paused[id] = true
	c.mu.Unlock()
}

// resume sends SIGCONT to a paused node.
func (c *cluster) resume(id int32) {
	c.t.Helper()
	if err := c.node(id).signal(syscall.SIGCONT); err != nil {
		c.t.Fatalf("broker %d: SIGCONT: %v", id, err)
	}
	c.mu.Lock()
	delete(c.paused, id)
	c.mu.Unlock()
}

// isPaused reports whether id is SIGSTOPped.
func (c *cluster) isPaused(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused[id]
}

// restart starts the given stopped or killed nodes again (all before
// waiting, as a restarted etcd member may need another for its quorum)
// and waits until each is ready.
func (c *cluster) restart(ids ...int32) {
	c.t.Helper()
	for _, id := range ids {
		b := c.node(id)
		if b.running() {
			c.t.Fatalf("broker %d: restart while still running", id)
		}
		b.mu.Lock()
		b.restarts++
		b.mu.Unlock()
		b.launch()
	}
	for _, id := range ids {
		c.node(id).waitReady()
	}
}

// signal sends sig to the current process.
func (b *broker) signal(sig syscall.Signal) error {
	b.mu.Lock()
	cmd := b.cmd
	b.mu.Unlock()
	if cmd == nil {
		return errors.New("never started")
	}
	return cmd.Process.Signal(sig)
}

// up lists the nodes that run and are not paused.
func (c *cluster) up() []int32 {
	var out []int32
	for _, id := range c.ids() {
		if c.node(id).running() && !c.isPaused(id) {
			out = append(out, id)
		}
	}
	return out
}

// pinnedVersions caps Produce and Fetch below v13, whose requests name
// topics by ID; the tests name them.
func pinnedVersions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(0, lastNamedVersion) // Produce
	v.SetMaxKeyVersion(1, lastNamedVersion) // Fetch
	return v
}

// directClient is a client whose requests (through its seed broker
// handle) go to node id only; one per node, shared by the test.
func (c *cluster) directClient(id int32) *kgo.Client {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.direct[id]; ok {
		return cl
	}
	cl := c.newDirectClient(id)
	c.direct[id] = cl
	return cl
}

// newDirectClient is a client of node id only, with connections of its
// own (franz-go closes a connection whose request's context ends before
// the answer, and with it every request pipelined on it); the caller
// closes it.
func (c *cluster) newDirectClient(id int32) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.node(id).kafkaAddr),
		kgo.ClientID(fmt.Sprintf("sluice-e2e-direct-%d", id)),
		kgo.MaxVersions(pinnedVersions()),
		kgo.RequestRetries(0),
	)
	if err != nil {
		c.t.Fatalf("kgo.NewClient for broker %d: %v", id, err)
	}
	return cl
}

// requestTo sends req to node id alone, within d.
func (c *cluster) requestTo(id int32, d time.Duration, req kmsg.Request) (kmsg.Response, error) {
	return requestVia(c.directClient(id), d, req)
}

// requestVia sends req to cl's seed broker, within d.
func requestVia(cl *kgo.Client, d time.Duration, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// metadata asks node id for the metadata of every topic.
func (c *cluster) metadata(id int32) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	resp, err := c.requestTo(id, 5*time.Second, req)
	if err != nil {
		return nil, fmt.Errorf("metadata from broker %d: %w", id, err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}

func brokerIDs(md *kmsg.MetadataResponse) []int32 {
	var ids []int32
	for _, b := range md.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids
}

// partitionInfo is one partition as a broker's Metadata answers it.
type partitionInfo struct {
	Leader, Epoch int32
	Replicas      []int32
	Code          int16
}

func partitionOf(md *kmsg.MetadataResponse, topic string, partition int32) (partitionInfo, bool) {
	for _, mt := range md.Topics {
		if mt.Topic == nil || *mt.Topic != topic {
			continue
		}
		for _, mp := range mt.Partitions {
			if mp.Partition == partition {
				return partitionInfo{mp.Leader, mp.LeaderEpoch, mp.Replicas, mp.ErrorCode}, true
			}
		}
	}
	return partitionInfo{}, false
}

// partition reads a partition's state from the first broker that is up and
// knows it.
func (c *cluster) partition(topic string, partition int32) (partitionInfo, int32, error) {
	var errs []error
	for _, id := range c.up() {
		md, err := c.metadata(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if pi, ok := partitionOf(md, topic, partition); ok {
			return pi, id, nil
		}
		errs = append(errs, fmt.Errorf("broker %d does not know %s/%d", id, topic, partition))
	}
	return partitionInfo{}, -1, errors.Join(errs...)
}

// waitLeader polls the brokers that are up until every one of them names
// a leader for the partition that is up and not in not, at one epoch;
// it returns that leader, its epoch, and how long the wait took.
func (c *cluster) waitLeader(topic string, partition int32, not []int32, timeout time.Duration) (int32, int32, time.Duration) {
	c.t.Helper()
	start := time.Now()
	var leader, epoch int32
	eventually(c.t, timeout, fmt.Sprintf("%s/%d has a leader other than %v", topic, partition, not), func() (bool, string) {
		var views []string
		leader, epoch = -1, -1
		agree := true
		for _, id := range c.up() {
			md, err := c.metadata(id)
			if err != nil {
				return false, err.Error()
			}
			pi, ok := partitionOf(md, topic, partition)
			views = append(views, fmt.Sprintf("broker %d: leader %d epoch %d", id, pi.Leader, pi.Epoch))
			if !ok || pi.Leader < 0 || slices.Contains(not, pi.Leader) || !slices.Contains(c.up(), pi.Leader) {
				agree = false
				continue
			}
			if leader >= 0 && (pi.Leader != leader || pi.Epoch != epoch) {
				agree = false
			}
			leader, epoch = pi.Leader, pi.Epoch
		}
		return agree && leader > 0, strings.Join(views, "; ")
	})
	return leader, epoch, time.Since(start)
}

// controller is the controller id every broker that is up agrees on.
func (c *cluster) controller() int32 {
	c.t.Helper()
	var ctl int32
	eventually(c.t, defaultTimeout, "the brokers agree on a controller", func() (bool, string) {
		var why string
		ctl, why = c.controllerView()
		return ctl > 0, why
	})
	return ctl
}

// controllerView is the controller id the brokers that are up agree on,
// or -1 with what each of them says.
func (c *cluster) controllerView() (int32, string) {
	var views []string
	ctl := int32(-1)
	agree := true
	for _, id := range c.up() {
		md, err := c.metadata(id)
		if err != nil {
			return -1, err.Error()
		}
		views = append(views, fmt.Sprintf("broker %d: %d", id, md.ControllerID))
		if ctl >= 0 && md.ControllerID != ctl {
			agree = false
		}
		ctl = md.ControllerID
	}
	if !agree {
		ctl = -1
	}
	return ctl, strings.Join(views, "; ")
}

// produceTo sends one batch of values to node id alone with the given acks
// and returns the partition's answer.
func (c *cluster) produceTo(id int32, topic string, partition int32, acks int16, timeout time.Duration, values ...string) (kmsg.ProduceResponseTopicPartition, error) {
	return produceVia(c.directClient(id), topic, partition, acks, timeout, timeout+5*time.Second, values...)
}

// produceVia sends one batch of values through cl's seed broker, with the
// request timeout given and waiting at most wait for the answer.
func produceVia(cl *kgo.Client, topic string, partition int32, acks int16, timeout, wait time.Duration, values ...string) (kmsg.ProduceResponseTopicPartition, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = int32(timeout / time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = valuesBatch(values...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := requestVia(cl, wait, req)
	if err != nil {
		return kmsg.ProduceResponseTopicPartition{}, err
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return kmsg.ProduceResponseTopicPartition{}, fmt.Errorf("produce answer names %d topics", len(pr.Topics))
	}
	return pr.Topics[0].Partitions[0], nil
}

// valuesBatch is an uncompressed, non-idempotent batch of the values.
func valuesBatch(values ...string) []byte {
	var recs []kv
	for _, v := range values {
		recs = append(recs, kv{nil, []byte(v)})
	}
	return encodeBatch(0, time.Now().UnixMilli(), recs...)
}

// fetchFrom reads one partition at offset from node id alone: whatever
// that broker's own log holds below its own high watermark.
func (c *cluster) fetchFrom(id int32, topic string, partition int32, offset int64) (kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.requestTo(id, 10*time.Second, req)
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("fetch from broker %d: %w", id, err)
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("fetch answer of broker %d names %d topics", id, len(fr.Topics))
	}
	return fr.Topics[0].Partitions[0], nil
}

// highWatermark is node id's own high watermark of the partition.
func (c *cluster) highWatermark(id int32, topic string, partition int32) (int64, error) {
	fp, err := c.fetchFrom(id, topic, partition, 0)
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
		return -1, fmt.Errorf("broker %d: %w", id, err)
	}
	return fp.HighWatermark, nil
}

// logBelow is node id's copy of the partition's log: the raw record
// batches (as stored, base offset and leader epoch stamped) of every
// offset below hw, which must not exceed that broker's own high watermark.
func (c *cluster) logBelow(id int32, topic string, partition int32, hw int64) ([]byte, error) {
	var out []byte
	next := int64(0)
	for next < hw {
		fp, err := c.fetchFrom(id, topic, partition, next)
		if err != nil {
			return nil, err
		}
		if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
			return nil, fmt.Errorf("broker %d at %d: %w", id, next, err)
		}
		data := fp.RecordBatches
		if len(data) == 0 {
			return nil, fmt.Errorf("broker %d: no batches at %d (its high watermark %d, want %d)", id, next, fp.HighWatermark, hw)
		}
		for len(data) >= 61 && next < hw {
			base := int64(binary.BigEndian.Uint64(data[0:8]))
			size := int(binary.BigEndian.Uint32(data[8:12])) + 12
			last := base + int64(int32(binary.BigEndian.Uint32(data[23:27])))
			if size > len(data) {
				break // a partial batch at the end of the answer
			}
			if base != next {
				return nil, fmt.Errorf("broker %d: batch at %d, expected %d", id, base, next)
			}
			out = append(out, data[:size]...)
			next = last + 1
			data = data[size:]
		}
	}
	if next != hw {
		return nil, fmt.Errorf("broker %d: batches end at %d, not at the high watermark %d", id, next, hw)
	}
	return out, nil
}

// grepLog returns the lines of node id's log that contain s.
func (c *cluster) grepLog(id int32, s string) []string {
	data, err := os.ReadFile(c.node(id).logPath)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}
