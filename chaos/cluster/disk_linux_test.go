package cluster_test

// disk_linux_test.go runs a cluster whose data dirs are small tmpfs mounts
// (Config.DataDirBytes): each is mounted at the size asked, FillDisk leaves
// the free space asked and the broker then refuses produce at its disk
// watermark, FreeDisk gives the space back, and neither Stop nor a failed
// Start leaves a mount behind. It skips where tmpfs cannot be mounted.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/cluster"
)

const tmpfsMagic = 0x01021994 // statfs f_type of a tmpfs

func TestDataDirBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts tmpfs and starts three sluiced processes, versitygw and an etcd server")
	}
	if binErr != nil {
		t.Fatal(binErr)
	}
	const (
		size  = 256 << 20 // the brokers' journals preallocate 64 MiB
		leave = 16 << 20  // below the brokers' default --disk-min-free-bytes (64 MiB)
		topic = "full"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := t.TempDir()

	// A failed Start unmounts what it mounted.
	failed := filepath.Join(root, "failed")
	_, err := cluster.Start(ctx, cluster.Config{Dir: failed, Sluiced: sluicedPath, VersityGW: versitygwPath,
		ExternalEtcd: true, DataDirBytes: size, ExtraArgs: []string{"--no-such-flag"}})
	if errors.Is(err, cluster.ErrNoMount) {
		t.Skip(err)
	}
	if err == nil {
		t.Fatal("Start with an unknown sluiced flag succeeded")
	}
	if m := mountsUnder(t, failed); len(m) > 0 {
		t.Fatalf("a failed Start left mounts %v", m)
	}

	dir := filepath.Join(root, "ok")
	c := startCluster(ctx, t, cluster.Config{Dir: dir, ExternalEtcd: true, DataDirBytes: size})
	for id := int32(1); id <= cluster.Size; id++ {
		st := statfs(t, c.Broker(id).DataDir)
		if st.Type != tmpfsMagic || st.Blocks*uint64(st.Bsize) != size {
			t.Fatalf("broker %d's data dir: file system type %#x of %d bytes, want a tmpfs (%#x) of %d",
				id, st.Type, st.Blocks*uint64(st.Bsize), tmpfsMagic, size)
		}
	}
	if m := mountsUnder(t, dir); len(m) != cluster.Size {
		t.Fatalf("mounts under %s: %v, want the %d data dirs", dir, m, cluster.Size)
	}

	adm := kadm.NewClient(newClient(t, c))
	if _, err := adm.CreateTopic(ctx, 1, cluster.Size, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	leader, _ := waitLeader(t, c, topic, 0, func(leader, _ int32) bool { return leader > 0 })
	acked := map[string]position{}
	prod := newClient(t, c, kgo.RecordDeliveryTimeout(3*time.Second), kgo.ProduceRequestTimeout(2*time.Second))
	produce(t, prod, topic, "roomy", []int32{0}, 3, acked)

	// Fill the leader's disk: the file system keeps about leave bytes, and
	// the leader refuses appends below its free-space watermark.
	if err := c.FillDisk(leader, leave); err != nil {
		t.Fatal(err)
	}
	b := c.Broker(leader)
	st := statfs(t, b.DataDir)
	free := int64(st.Bavail) * st.Bsize
	if free < leave-(1<<20) || free >= leave+st.Bsize {
		t.Fatalf("free after FillDisk(%d): %d bytes", leave, free)
	}
	t.Logf("broker %d filled: %d bytes free (asked %d)", leader, free, leave)
	// The broker measures its free space every 50 ms: until it has, a
	// record may still be acknowledged (and must then be read back).
	begin := time.Now()
	for i := 0; ; i++ {
		v := fmt.Sprintf("filling-%d", i)
		res := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)})
		r, err := res.First()
		if err != nil {
			t.Logf("produce to broker %d with a full disk failed after %v (%d acknowledged first): %v",
				leader, time.Since(begin).Round(time.Millisecond), i, err)
			break
		}
		acked[v] = position{r.Partition, r.Offset}
		if time.Since(begin) > stepTimeout {
			t.Fatalf("broker %d still acknowledges records %v after its disk was filled to %d bytes free", leader, stepTimeout, free)
		}
	}
	if err := c.FreeDisk(leader); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.DataDir, "chaos-filler")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("filler after FreeDisk: %v", err)
	}
	if st := statfs(t, b.DataDir); int64(st.Bavail)*st.Bsize < size/2 {
		t.Fatalf("free after FreeDisk: %d bytes of %d", int64(st.Bavail)*st.Bsize, size)
	}
	if err := c.FreeDisk(leader); err != nil {
		t.Fatalf("second FreeDisk: %v", err)
	}
	prod2 := newClient(t, c, kgo.RecordDeliveryTimeout(stepTimeout))
	produce(t, prod2, topic, "freed", []int32{0}, 3, acked)
	readBack(t, c, topic, acked)

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if m := mountsUnder(t, dir); len(m) > 0 {
		t.Fatalf("mounts left after Stop: %v", m)
	}
	if err := c.FillDisk(leader, 0); !errors.Is(err, cluster.ErrStopped) {
		t.Fatalf("FillDisk after Stop: %v, want ErrStopped", err)
	}
}

func statfs(t *testing.T, dir string) syscall.Statfs_t {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// mountsUnder lists the mount points in /proc/self/mounts at or under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		// Spaces and the like are octal escapes there; t.TempDir has none.
		mp := fields[1]
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
