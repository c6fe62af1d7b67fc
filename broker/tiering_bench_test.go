package broker

// tiering_bench_test.go measures a replay from offset 0 of one partition in
// three ways against one broker on Versity's S3 gateway (a real S3 server on
// loopback), in one process and one run so that the three compare as
// ratios: from local segments, from object storage with the broker's read
// cache cold, and from object storage with the cache warm, with the cache's
// hit ratio. It also reports what the setup's uploads cost: object-storage
// PUTs per GiB uploaded. BENCHMARKS.md ("Tiering") has a run's figures.
//
//	go test -run '^$' -bench TieredReplay -benchtime 5x -count 3 -timeout 20m ./broker/   (make bench-tier)

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/cache"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

const (
	replayBenchBytes  = 128 << 20 // produced to each topic
	replayRecordBytes = 1024
	replayLocalTopic  = "replay-local"
	replayRemoteTopic = "replay-remote"
)

// The topics: segments of 1 MiB, objects of 8 MiB; the remote topic
// keeps nothing local once uploaded, the local one never tiers.
var (
	replayRemoteConfigs = map[string]string{
		"segment.bytes":              "1048576",
		"remote.upload.bytes":        "8388608",
		"remote.upload.max.delay.ms": "1000", // the tail below 8 MiB goes up a second after the last record
		"local.retention.ms":         "0",
		"retention.ms":               "-1",
	}
	replayLocalConfigs = map[string]string{
		"segment.bytes":         "1048576",
		"remote.storage.enable": "false",
		"retention.ms":          "-1",
	}
)

// cleanupOn is tb whose cleanups run when parent ends: a broker restarted
// inside a sub-benchmark must outlive the sub-benchmark's run, whose
// cleanups run after every round of b.N.
type cleanupOn struct {
	testing.TB
	parent testing.TB
}

func (c cleanupOn) Cleanup(f func()) { c.parent.Cleanup(f) }

func BenchmarkTieredReplay(b *testing.B) {
	if testing.Short() {
		b.Skip("starts an S3 server and uploads 128 MiB")
	}
	srv := s3test.Start(b)
	cfg := testBrokerConfig(b)
	cfg.ObjectStore = srv.URL(fmt.Sprintf("bench-%d", time.Now().UnixNano()))
	cfg.ObjectStoreOptions = srv.Options()
	cfg.ReadCacheBytes = 512 << 20 // holds the whole topic: the warm replay reads no object twice
	// The local replay is the page cache's, as the S3 server's files are:
	// the comparison is of the read paths, not of the disk.
	cfg.PageCacheTailBytes = 0
	br, stop := startStoppableBroker(b, cfg)

	up := replaySetup(b, br)
	n := up.records
	putsPerGiB := float64(up.objects+up.manifests) / (float64(up.bytes) / (1 << 30))
	parent := b

	b.Run("local", func(b *testing.B) {
		b.SetBytes(n * replayRecordBytes)
		var took time.Duration
		for range b.N {
			took += replay(b, br, replayLocalTopic, n)
		}
		b.ReportMetric(float64(n)*float64(b.N)/took.Seconds(), "records/s")
	})
	b.Run("remote-cold", func(b *testing.B) {
		b.SetBytes(n * replayRecordBytes)
		var took time.Duration
		var sum cache.Stats
		for range b.N {
			// A new broker process state: an empty read cache. (The S3
			// server's files stay in the page cache, as the local
			// segments do.)
			b.StopTimer()
			stop()
			br, stop = startStoppableBroker(cleanupOn{b, parent}, cfg)
			b.StartTimer()
			took += replay(b, br, replayRemoteTopic, n)
			st := br.Rcache.Stats()
			sum.Hits, sum.Misses = sum.Hits+st.Hits, sum.Misses+st.Misses
			sum.Fills, sum.PrefetchesStarted = sum.Fills+st.Fills, sum.PrefetchesStarted+st.PrefetchesStarted
		}
		b.ReportMetric(float64(n)*float64(b.N)/took.Seconds(), "records/s")
		reportCache(b, sum)
		b.ReportMetric(putsPerGiB, "PUTs/GiB")
		checkRemote(b, br, n)
		b.Logf("setup: records [0, %d) only in object storage; uploaded %d objects and %d manifests, %.1f MiB, in %.1f s from the first record produced",
			n, up.objects, up.manifests, float64(up.bytes)/(1<<20), up.took.Seconds())
	})
	b.Run("remote-warm", func(b *testing.B) {
		b.StopTimer()
		replay(b, br, replayRemoteTopic, n) // every chunk in the cache
		before := br.Rcache.Stats()
		b.SetBytes(n * replayRecordBytes)
		b.StartTimer()
		var took time.Duration
		for range b.N {
			took += replay(b, br, replayRemoteTopic, n)
		}
		b.StopTimer()
		after := br.Rcache.Stats()
		b.ReportMetric(float64(n)*float64(b.N)/took.Seconds(), "records/s")
		reportCache(b, cache.Stats{Hits: after.Hits - before.Hits, Misses: after.Misses - before.Misses,
			Fills: after.Fills - before.Fills, PrefetchesStarted: after.PrefetchesStarted - before.PrefetchesStarted})
		b.ReportMetric(putsPerGiB, "PUTs/GiB")
		checkRemote(b, br, n)
	})
}

// reportCache reports the read cache's hit ratio (the share of Gets
// answered from the cache: every fetch Gets a footer and one or two
// chunks) and the fills per op a reader had to wait for from their start
// (fills not started by read-ahead).
func reportCache(b *testing.B, st cache.Stats) {
	if st.Hits+st.Misses > 0 {
		b.ReportMetric(float64(st.Hits)/float64(st.Hits+st.Misses), "hit-ratio")
	}
	b.ReportMetric(float64(st.Fills-st.PrefetchesStarted)/float64(b.N), "waited-fills/op")
}

// checkRemote fails the benchmark if a remote read failed or the replays
// did not read everything from object storage, and logs the counters.
func checkRemote(b *testing.B, br *Broker, records int64) {
	st, cs := br.Tiers.Stats(), br.Rcache.Stats()
	if st.ReadErrors > 0 || cs.FillErrors > 0 {
		b.Fatalf("remote reads failed: tier %+v, cache %+v", st, cs)
	}
	b.Logf("broker since start: %d remote reads, %.1f MiB read from object storage; cache: %d hits, %d misses, %d fills, %d started by read-ahead",
		st.RemoteReads, float64(st.RemoteReadBytes)/(1<<20), cs.Hits, cs.Misses, cs.Fills, cs.PrefetchesStarted)
	if st.RemoteReadBytes < records*replayRecordBytes {
		b.Fatalf("only %d bytes were read from object storage, want at least %d", st.RemoteReadBytes, records*replayRecordBytes)
	}
}

// replayUploads is what the setup's uploads of the remote topic did.
type replayUploads struct {
	records            int64 // offsets [0, records) are only in object storage
	objects, manifests int64
	bytes              int64 // object bytes PUT
	took               time.Duration
}

// replaySetup produces replayBenchBytes of 1 KiB records to each topic and
// waits until the remote topic's log is uploaded and deleted locally down
// to its active segment.
func replaySetup(b *testing.B, br *Broker) replayUploads {
	b.Helper()
	cl := testClient(b, br, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(1<<16), kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(b, cl, replayLocalTopic, 1, replayLocalConfigs)
	createTopic(b, cl, replayRemoteTopic, 1, replayRemoteConfigs)
	value := make([]byte, replayRecordBytes)
	rand.NewChaCha8([32]byte{3}).Read(value) // incompressible, like real payloads
	start := time.Now()
	ctx := context.Background()
	for _, topic := range []string{replayRemoteTopic, replayLocalTopic} {
		for range replayBenchBytes / replayRecordBytes {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Errorf("produce: %v", err)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	p, err := br.PartitionOf(replayRemoteTopic, 0)
	if err != nil {
		b.Fatal(err)
	}
	brokertest.EventuallyWhy(b, 5*time.Minute, "the remote topic uploaded and deleted locally down to its active segment", func() (bool, string) {
		r := br.RemoteRange(ctx, p)
		end, segs := p.Log().EndOffset(), len(p.Log().Segments())
		return r.RemoteEnd == end && segs == 1, fmt.Sprintf("remote [%d, %d), local [%d, %d) in %d segments",
			r.LogStart, r.RemoteEnd, p.Log().StartOffset(), end, segs)
	})
	up := replayUploads{records: int64(p.Log().StartOffset()), took: time.Since(start)}
	_, h, err := br.Tiers.Objects(ctx, p.TopicID(), 0)
	if err != nil {
		b.Fatal(err)
	}
	st := br.Tiers.Stats()
	up.objects, up.manifests, up.bytes = st.ObjectsUploaded, int64(len(h.Manifests)), st.BytesUploaded
	if st.UploadErrors > 0 {
		b.Fatalf("%d uploads failed", st.UploadErrors)
	}
	return up
}

// replay reads records [0, n) of topic's partition 0 with a new franz-go
// consumer (its default fetch sizes: 1 MiB per partition, 50 MiB per
// fetch) and returns how long it took from the client's creation.
func replay(b *testing.B, br *Broker, topic string, n int64) time.Duration {
	b.Helper()
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.KafkaAddr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var next int64
	for next < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			b.Fatalf("replay of %s stopped at %d of %d: %v", topic, next, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { b.Fatalf("replay of %s at %d: %v", topic, next, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next && next < n {
				b.Fatalf("replay of %s: offset %d after %d", topic, r.Offset, next-1)
			}
			next++
		})
	}
	return time.Since(start)
}
