// Command failover measures how long a three-broker cluster started by
// deploy/cluster.sh takes to recover from a kill -9: it creates a topic
// (replication factor 3) if needed, waits until every partition has a
// leader and a full in-sync set in every broker's Metadata, kills one
// broker and polls every survivor's Metadata every 20 ms. It prints the
// time from the kill until every partition has a live leader other than
// the victim in every survivor's answer, and until no survivor names the
// victim in any in-sync set.
//
// The victim is chosen by -kill: "leader" is a broker that leads a
// partition and is not the controller, "controller" is the controller
// (which leads partitions of its own on a fresh cluster). -etcd-leader
// moves the embedded etcd's leadership to the victim or away from it first:
// a broker that dies with etcd's leadership costs an etcd election, and the
// new etcd leader grants every lease a fresh TTL, so leases (the
// controller's, the victim's registration) expire later.
//
//	deploy/cluster.sh start /tmp/c
//	go run ./scripts/failover -dir /tmp/c -kill controller
//
// scripts/failover.sh repeats it on fresh clusters.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	dir := flag.String("dir", "data/cluster", "the cluster's directory (deploy/cluster.sh; pids in DIR/nN/pid)")
	kbase := flag.Int("kafka-base", 19090, "deploy/cluster.sh's KAFKA_BASE: broker n listens on base+n")
	kill := flag.String("kill", "leader", `whom to kill: "leader" (a partition leader that is not the controller) or "controller"`)
	topic := flag.String("topic", "failover", "topic to create (if absent) and watch")
	partitions := flag.Int("partitions", 6, "partitions of the topic when it is created")
	timeout := flag.Duration("timeout", 90*time.Second, "give up after this long")
	verbose := flag.Bool("v", false, "print when each survivor's answer changes for each partition")
	ebase := flag.Int("etcd-base", 2379, "deploy/cluster.sh's ETCD_BASE: broker n's etcd client port is base+10(n-1)")
	etcdLeader := flag.String("etcd-leader", "any", `where etcd's leadership is at the kill: "any" (left as it is), "victim" or "survivor"`)
	flag.Parse()
	if *kill != "leader" && *kill != "controller" {
		log.Fatalf("-kill %q: want leader or controller", *kill)
	}
	addr := func(n int32) string { return "127.0.0.1:" + strconv.Itoa(*kbase+int(n)) }
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr(1), addr(2), addr(3)))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	if err := createTopic(ctx, cl, *topic, *partitions); err != nil {
		log.Fatal(err)
	}
	// Steady state: every broker agrees every partition has a leader and
	// all three replicas in sync.
	var md *kmsg.MetadataResponse
	for {
		var ok bool
		md, ok = steady(ctx, cl, *topic)
		if ok {
			break
		}
		if ctx.Err() != nil {
			log.Fatalf("no steady state before the timeout")
		}
		time.Sleep(100 * time.Millisecond)
	}
	victim := chooseVictim(md, *kill)
	if victim < 0 {
		log.Fatalf("no broker fits -kill %s", *kill)
	}
	etcdAt := func(n int32) string { return "127.0.0.1:" + strconv.Itoa(*ebase+10*(int(n)-1)) }
	etcdLed, err := placeEtcdLeader(ctx, etcdAt, victim, *etcdLeader)
	if err != nil {
		log.Fatal(err)
	}
	pid, err := readPid(fmt.Sprintf("%s/n%d/pid", *dir, victim))
	if err != nil {
		log.Fatal(err)
	}
	led := 0
	for _, p := range md.Topics[0].Partitions {
		if p.Leader == victim {
			led++
		}
	}
	var survivors []int32
	for n := int32(1); n <= 3; n++ {
		if n != victim {
			survivors = append(survivors, n)
		}
	}

	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		log.Fatalf("kill broker %d (pid %d): %v", victim, pid, err)
	}
	var leaderAt, isrAt time.Duration
	seen := map[string]string{}
	for (leaderAt == 0 || isrAt == 0) && ctx.Err() == nil {
		allLed, noneISR := true, true
		for _, n := range survivors {
			led, out, err := afterKill(ctx, cl, n, *topic, victim, func(p kmsg.MetadataResponseTopicPartition) {
				if !*verbose {
					return
				}
				k, v := fmt.Sprintf("broker %d partition %d", n, p.Partition), fmt.Sprintf("leader %d isr %v", p.Leader, p.ISR)
				if seen[k] != v {
					seen[k] = v
					fmt.Printf("%6.2f s  %s: %s\n", time.Since(killed).Seconds(), k, v)
				}
			})
			if err != nil {
				allLed, noneISR = false, false
				continue
			}
			allLed = allLed && led
			noneISR = noneISR && out
		}
		since := time.Since(killed)
		if allLed && leaderAt == 0 {
			leaderAt = since
		}
		if noneISR && isrAt == 0 {
			isrAt = since
		}
		time.Sleep(20 * time.Millisecond)
	}
	role := "leader of %d partitions, not the controller"
	if *kill == "controller" {
		role = "controller and leader of %d partitions"
	}
	if etcdLed {
		role += ", and etcd's leader"
	}
	fmt.Printf("killed broker %d ("+role+"): new leaders in %s, out of every in-sync set in %s\n",
		victim, led, show(leaderAt), show(isrAt))
}

// placeEtcdLeader moves etcd's leadership as where asks and reports
// whether the victim holds it.
func placeEtcdLeader(ctx context.Context, at func(int32) string, victim int32, where string) (bool, error) {
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{at(1), at(2), at(3)}, DialTimeout: 5 * time.Second})
	if err != nil {
		return false, fmt.Errorf("etcd client: %w", err)
	}
	defer func() { _ = cl.Close() }()
	ids := map[int32]uint64{}
	var leader uint64
	for n := int32(1); n <= 3; n++ {
		st, err := cl.Status(ctx, at(n))
		if err != nil {
			return false, fmt.Errorf("etcd status of broker %d: %w", n, err)
		}
		ids[n], leader = st.Header.MemberId, st.Leader
	}
	target := uint64(0)
	switch {
	case where == "victim" && leader != ids[victim]:
		target = ids[victim]
	case where == "survivor" && leader == ids[victim]:
		target = ids[victim%3+1]
	}
	if target != 0 {
		for n, id := range ids {
			if id == leader {
				// MoveLeader must reach the current leader.
				one, err := clientv3.New(clientv3.Config{Endpoints: []string{at(n)}, DialTimeout: 5 * time.Second})
				if err != nil {
					return false, fmt.Errorf("etcd client: %w", err)
				}
				_, err = one.MoveLeader(ctx, target)
				_ = one.Close()
				if err != nil {
					return false, fmt.Errorf("move etcd's leadership: %w", err)
				}
			}
		}
		leader = target
		// The new etcd leader granted every lease a fresh TTL; wait until
		// they all renewed on their own again, so the kill sees leases as
		// they normally are.
		time.Sleep(12 * time.Second)
	}
	return leader == ids[victim], nil
}

func show(d time.Duration) string {
	if d == 0 {
		return "(not within the timeout)"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read pid: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int) error {
	req := kmsg.NewCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(partitions), 3
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic: %w", err)
	}
	return nil
}

// metadata asks broker n.
func metadata(ctx context.Context, cl *kgo.Client, n int32, topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r, err := cl.Broker(int(n)).Request(rctx, &req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return nil, fmt.Errorf("topic %s not known", topic)
	}
	return resp, nil
}

// steady asks every broker and reports whether all agree that every
// partition has a leader and three replicas in sync.
func steady(ctx context.Context, cl *kgo.Client, topic string) (*kmsg.MetadataResponse, bool) {
	var first *kmsg.MetadataResponse
	for n := int32(1); n <= 3; n++ {
		md, err := metadata(ctx, cl, n, topic)
		if err != nil || md.ControllerID < 0 {
			return nil, false
		}
		for _, p := range md.Topics[0].Partitions {
			if p.Leader < 0 || len(p.ISR) != 3 {
				return nil, false
			}
		}
		if first == nil {
			first = md
		}
	}
	return first, true
}

func chooseVictim(md *kmsg.MetadataResponse, kill string) int32 {
	if kill == "controller" {
		return md.ControllerID
	}
	var leaders []int32
	for _, p := range md.Topics[0].Partitions {
		if p.Leader != md.ControllerID && !slices.Contains(leaders, p.Leader) {
			leaders = append(leaders, p.Leader)
		}
	}
	if len(leaders) == 0 {
		return -1
	}
	slices.Sort(leaders)
	return leaders[0]
}

// afterKill reports, from one survivor's Metadata, whether every partition
// has a leader other than the victim, and whether no in-sync set names it.
func afterKill(ctx context.Context, cl *kgo.Client, n int32, topic string, victim int32, each func(kmsg.MetadataResponseTopicPartition)) (led, out bool, err error) {
	md, err := metadata(ctx, cl, n, topic)
	if err != nil {
		return false, false, err
	}
	led, out = true, true
	for _, p := range md.Topics[0].Partitions {
		each(p)
		if p.Leader < 0 || p.Leader == victim {
			led = false
		}
		if slices.Contains(p.ISR, victim) {
			out = false
		}
	}
	return led, out, nil
}
