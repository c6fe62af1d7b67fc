package broker

// The disk-watermark ladder on a real, small file system: a 64 MiB tmpfs
// mounted as the broker's data dir, filled by producing and drained by
// DeleteRecords and DeleteTopics, with the broker reading the file system
// by statfs as in production (no injected disk reader).
//
// Invariant: the tmpfs is unmounted in t.Cleanup after the broker stopped
// (cleanups run last-in first-out, and the mount is registered first).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory and
// unmounts it at cleanup; it skips the test where mounting is not allowed.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sluice-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("mount a tmpfs on %s: %v (needs root or CAP_SYS_ADMIN)", dir, err)
		}
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			// A lazy unmount still frees it once the last file closes.
			out, _ := exec.Command("umount", "-l", dir).CombinedOutput()
			t.Errorf("unmount %s: %v (umount -l: %s)", dir, err, out)
		}
	})
	return dir
}

// ladderMoves lists the ladder's log lines in the order written: "+1" for
// "disk above watermark 1", "-1" for "disk below watermark 1 again".
func (l *logLines) ladderMoves(t *testing.T) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var moves []string
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		var e struct {
			Message string
			Level   int `json:"disk_level"`
		}
		if line == "" || json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		switch {
		case strings.HasPrefix(e.Message, "disk above watermark"):
			moves = append(moves, fmt.Sprintf("+%d", e.Level))
		case strings.HasPrefix(e.Message, "disk below watermark"):
			moves = append(moves, fmt.Sprintf("-%d", e.Level))
		}
	}
	return moves
}

// TestDiskLadderOnTmpfs fills a 64 MiB tmpfs data dir by producing, with
// the ladder at 35,55,75 % and a reserve of 6 MiB (about 91 %), and sees
// each step reached in order: at the first, CreateTopics is refused with
// POLICY_VIOLATION; at the third, a publish of the tenant once it is over
// its quota is refused with the retriable KAFKA_STORAGE_ERROR while one
// within its quota is taken; then every publish stops at the reserve,
// before the file system is full. DeleteRecords on one topic and
// DeleteTopics on the other drain it: each step is left in reverse order,
// and the broker takes publishes and new topics again — the reserve left
// it the room to do so.
func TestDiskLadderOnTmpfs(t *testing.T) {
	const size = 64 << 20
	dir := mountTmpfs(t, size)
	cfg := testBrokerConfig(t)
	cfg.DataDir = dir
	cfg.Meta.DataDir = t.TempDir() // etcd preallocates 64 MiB WAL files: on a disk of its own
	cfg.DiskWatermarks = node.Watermarks{35, 55, 75}
	cfg.DiskMinFreeBytes = 6 << 20
	b, logs := startBrokerLogLines(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The levels as the disk guard publishes them, sampled throughout.
	var (
		mu     sync.Mutex
		levels []int
	)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			l := b.DiskLevel()
			mu.Lock()
			if len(levels) == 0 || levels[len(levels)-1] != l {
				levels = append(levels, l)
			}
			mu.Unlock()
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	used := func() string {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%.1f%% used, %d bytes free", 100*float64(st.Blocks-st.Bavail)/float64(st.Blocks), int64(st.Bavail)*st.Bsize)
	}

	// upLevel is the level a rising disk is at now, by statfs.
	upLevel := func() int {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		pct, l := 100*float64(st.Blocks-st.Bavail)/float64(st.Blocks), 0
		for l < len(cfg.DiskWatermarks) && pct >= cfg.DiskWatermarks[l] {
			l++
		}
		return l
	}

	// No retries: every refusal comes back to the test as it is.
	cl := testClient(t, b, kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(20*time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	topicCfg := map[string]string{"segment.bytes": fmt.Sprint(1 << 20)}
	createTopic(t, cl, "fill-a", 1, topicCfg)
	createTopic(t, cl, "fill-b", 1, topicCfg)
	value := make([]byte, 32<<10)
	for i := range value {
		value[i] = byte(i * 7) // uncompressed anyway
	}
	// produce writes 256 KiB (0.4 % of the disk) to topic in one request.
	produce := func(c *kgo.Client, topic string) error {
		recs := make([]*kgo.Record, 8)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topic, Value: value}
		}
		return c.ProduceSync(ctx, recs...).FirstErr()
	}
	written := 0
	fillTo := func(level int) {
		t.Helper()
		for b.DiskLevel() < level {
			topic := []string{"fill-a", "fill-b"}[written%2]
			if err := produce(cl, topic); err != nil {
				t.Fatalf("produce below level %d (at %d, %s): %v", level, b.DiskLevel(), used(), err)
			}
			written++
			// Pace the fill to the guard's readings (every 50 ms), so
			// the test sees the disk at each step, not past two.
			if b.DiskLevel() < upLevel() {
				eventuallyTrue(t, "the guard's reading", func() (bool, string) {
					return b.DiskLevel() >= upLevel(), fmt.Sprintf("level %d, %s", b.DiskLevel(), used())
				})
			}
			if written > 4*size/(256<<10) {
				t.Fatalf("wrote %d KiB and the disk is at level %d (%s)", written*256, b.DiskLevel(), used())
			}
		}
		t.Logf("level %d after %d KiB: %s", b.DiskLevel(), written*256, used())
	}

	fillTo(1)
	_, st := createTopicsResp(t, cl, "new-at-1", 1)
	wantRefused(t, "a new topic at the first step", st.ErrorCode, st.ErrorMessage, kerr.PolicyViolation, "disk above the first watermark")
	if !strings.Contains(scrape(t, httpBase(b)), "sluice_disk_watermark_level 1\n") {
		t.Fatalf("the metrics do not export level 1 (level %d)", b.DiskLevel())
	}

	fillTo(2)
	fillTo(3)

	// The third step: the default tenant, with no quota, is within it, so
	// its publishes still go. Given a quota of 1 KiB/s it is soon over it
	// (a 256 KiB request is one quarter of an hour's worth), and then its
	// publishes are refused, retriably. Each try is a fresh client: one
	// that was throttled waits out its throttle time before sending again.
	if err := produce(cl, "fill-a"); err != nil {
		t.Fatalf("a publish within quota at the third step: %v", err)
	}
	if _, err := b.Store.EnsureTenant(ctx, meta.DefaultTenant); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.SetQuotas(ctx, meta.DefaultTenant, map[string]float64{quota.ProducerByteRate: 1 << 10}, nil, quota.Check); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the quota followed", func() (bool, string) {
		l := b.Quotas().Limits(meta.DefaultTenant)
		return l[quota.ProducerByteRate] == 1<<10, fmt.Sprint(l)
	})
	for try := 1; ; try++ {
		c := testClient(t, b, kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(20*time.Second),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
		err := produce(c, "fill-a")
		c.Close()
		if errors.Is(err, kerr.KafkaStorageError) {
			if !kerr.IsRetriable(err) {
				t.Fatalf("%v is not retriable", err)
			}
			t.Logf("over quota at the third step, refused at try %d: %v", try, err)
			break
		}
		if err != nil {
			t.Fatalf("a publish over quota at the third step: %v, want KAFKA_STORAGE_ERROR", err)
		}
		if try == 3 {
			t.Fatalf("%d publishes of 256 KiB at 1 KiB/s taken at the third step", try)
		}
	}
	if _, err := b.Store.SetQuotas(ctx, meta.DefaultTenant, nil, []string{quota.ProducerByteRate}, quota.Check); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the quota was removed", func() (bool, string) {
		l := b.Quotas().Limits(meta.DefaultTenant)
		_, ok := l[quota.ProducerByteRate]
		return !ok, fmt.Sprint(l)
	})
	// It was the quota that refused, not the reserve: without it the same
	// publish is taken on the same disk.
	eventuallyTrue(t, "a publish taken again at the third step once the quota is gone", func() (bool, string) {
		c := testClient(t, b, kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(20*time.Second), kgo.ProducerLinger(0))
		defer c.Close()
		err := c.ProduceSync(ctx, &kgo.Record{Topic: "fill-a", Value: []byte("within")}).FirstErr()
		return err == nil, fmt.Sprintf("%v (level %d, %s)", err, b.DiskLevel(), used())
	})
	if l := b.DiskLevel(); l != 3 {
		t.Fatalf("level %d after the over-quota refusal, want 3", l)
	}

	// Into the reserve: publishes are refused before the disk is full.
	fresh := testClient(t, b, kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(20*time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	free := func() int64 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Bavail) * st.Bsize
	}
	for n := 0; free() >= cfg.DiskMinFreeBytes; n++ {
		topic := []string{"fill-a", "fill-b"}[n%2]
		// The guard reads the disk every 50 ms, and free space can rise
		// between two readings (a journal checkpoint recycles or removes
		// files): a publish refused on the guard's last reading is taken
		// once it has read the disk again, if the disk is still above the
		// reserve then.
		eventuallyTrue(t, "a publish taken above the reserve", func() (bool, string) {
			err := produce(fresh, topic)
			if err == nil || (errors.Is(err, kerr.KafkaStorageError) && free() < cfg.DiskMinFreeBytes) {
				return true, ""
			}
			if !errors.Is(err, kerr.KafkaStorageError) {
				t.Fatalf("produce toward the reserve (%s): %v", used(), err)
			}
			return false, fmt.Sprintf("refused at %s (the guard: %v)", used(), b.CheckDisk())
		})
		if n > size/(256<<10) {
			t.Fatalf("still above the reserve after %d more requests (%s)", n, used())
		}
	}
	eventuallyTrue(t, "publishes refused in the reserve", func() (bool, string) {
		err := produce(fresh, "fill-a")
		return errors.Is(err, kerr.KafkaStorageError), fmt.Sprintf("%v (%s)", err, used())
	})
	t.Logf("refused in the reserve at %s", used())
	// What the guard let in past the reserve is one reading's worth.
	if f := free(); f < cfg.DiskMinFreeBytes/2 {
		t.Fatalf("only %d bytes free when publishes stopped, the reserve is %d", f, cfg.DiskMinFreeBytes)
	}

	// Drain: half by DeleteRecords (segments below the new log start go),
	// the rest by deleting the other topic.
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, "fill-a")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("fill-a", 0)
	dr := deleteRecordsDirect(t, b, cl, "fill-a", 0, end.Offset)
	if dr.ErrorCode != 0 {
		t.Fatalf("DeleteRecords fill-a to %d: %v", end.Offset, kerr.ErrorForCode(dr.ErrorCode))
	}
	eventuallyTrue(t, "DeleteRecords freed a step or more", func() (bool, string) {
		return b.DiskLevel() < 3, fmt.Sprintf("level %d, %s", b.DiskLevel(), used())
	})
	t.Logf("after DeleteRecords: level %d, %s", b.DiskLevel(), used())
	dreq := kmsg.NewPtrDeleteTopicsRequest()
	dreq.TimeoutMillis = 10000
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("fill-b")
	dreq.Topics = append(dreq.Topics, dt)
	dreq.TopicNames = []string{"fill-b"}
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil || dresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete fill-b: %v %+v", err, dresp)
	}
	eventuallyTrue(t, "the disk drained to level 0", func() (bool, string) {
		return b.DiskLevel() == 0, fmt.Sprintf("level %d, %s", b.DiskLevel(), used())
	})
	t.Logf("after DeleteTopics: %s", used())
	eventuallyTrue(t, "publishes taken again", func() (bool, string) {
		err := produce(fresh, "fill-a")
		return err == nil, fmt.Sprint(err)
	})
	createTopic(t, cl, "new-at-0", 1, nil)

	stopSampling()
	<-sampled
	mu.Lock()
	got := fmt.Sprint(levels)
	// A sample may miss a level held for less than 5 ms, never invent
	// one: the levels rise to 3 and fall back to 0 without turning twice.
	peak := 0
	for i := 1; i < len(levels); i++ {
		if levels[i] < levels[i-1] && peak == 0 {
			peak = i
		}
		if peak != 0 && levels[i] > levels[i-1] {
			t.Errorf("the level rose again after falling: %s", got)
		}
	}
	mu.Unlock()
	if peak == 0 || levels[peak-1] != 3 || levels[len(levels)-1] != 0 {
		t.Errorf("levels sampled %s: want a rise to 3 and a fall to 0", got)
	}
	if moves, want := fmt.Sprint(logs.ladderMoves(t)), "[+1 +2 +3 -3 -2 -1]"; moves != want {
		t.Fatalf("the ladder moved %s, want %s (levels sampled %s)", moves, want, got)
	}
	if !strings.Contains(scrape(t, httpBase(b)), "sluice_disk_watermark_level 0\n") {
		t.Fatal("the metrics do not export level 0 after the drain")
	}
}
