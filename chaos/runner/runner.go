// Package runner runs one chaos scenario end to end: it starts a real
// three-broker cluster with its S3 server (chaos/cluster), drives the keyed
// workload (chaos/workload) while injecting the scenario's faults on a
// seeded schedule, heals, drains every partition, reads every replica's log
// (chaos/replicas), and checks the recorded history (chaos/checker).
//
// Invariant: every fault started is recorded (fault-start) before it is
// injected and healed (fault-stop) before the drain; the drain and the
// replica logs are read only after every broker is up again.
package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/checker"
	"github.com/sluice-mq/sluice/chaos/cluster"
	"github.com/sluice-mq/sluice/chaos/history"
	"github.com/sluice-mq/sluice/chaos/replicas"
	"github.com/sluice-mq/sluice/chaos/workload"
)

// Config says what to run.
type Config struct {
	Scenario  string
	Duration  time.Duration // how long faults are injected while the workload runs
	Seed      uint64
	Dir       string // work dir: the cluster, the history
	Sluiced   string
	VersityGW string
	// Tierctl is bin/tierctl, which re-reads every partition from object
	// storage after the drain (tiered.go); empty: no tiered re-read.
	Tierctl string
	Rate    int // sends per second
	// DrainTimeout bounds the drain, the replica reads and the tiered
	// re-read together; default 3 min.
	DrainTimeout time.Duration
	// BrokerLogLevel is the brokers' --log-level; empty: info.
	BrokerLogLevel string
	Logger         zerolog.Logger
}

// Result is one run's outcome.
type Result struct {
	Scenario        string
	Seed            uint64
	History         string // path of the JSON-lines history
	Faults          map[string]int
	Stats           workload.Stats
	Report          checker.Report
	Recoveries      []time.Duration // from each heal to the next acknowledged send
	Elapsed         time.Duration
	UnexpectedExits []error
	// TieredRecords is how many records the tiered re-read returned.
	TieredRecords int
	// OutOfSync lists what had not healed a minute after the drain: a
	// partition whose in-sync set lacks a replica, or side-topic replicas
	// (the lagging-follower family) that disagree.
	OutOfSync []string
	// LagAcked counts the side topic's acknowledged records.
	LagAcked int
	// Violations are the noisy-tenant family's findings: a tenant over its
	// quota, or the quiet workload below its floor during a burst.
	Violations []string
	// CanaryFindings are what the brokers' canaries found wrong (a
	// scenario with canaries, canary.go): one not available again after
	// the drain, a mismatch, or a killed broker's canary that did not
	// report the outage of its kill and its end; Canary is a line per
	// broker's canary.
	CanaryFindings, Canary []string
	// Stalls is how long the consumer group went without records while the
	// producers ran (measured in every run; enforced by strict scenarios).
	Stalls Stalls
}

// OK reports whether the run found no anomaly, no broker died by itself and
// every replica was back in sync.
func (r Result) OK() bool {
	return r.Report.OK() && len(r.UnexpectedExits) == 0 && len(r.OutOfSync) == 0 && len(r.Violations) == 0 &&
		len(r.CanaryFindings) == 0
}

const (
	topic      = "chaos"
	partitions = 3
	group      = "chaos-group"
)

// Run runs cfg's scenario. An error means the run could not be carried out
// to the end; Result.Report then holds what the history recorded so far
// says, when it could be read.
func Run(ctx context.Context, cfg Config) (Result, error) {
	sc, ok := lookup(cfg.Scenario)
	if !ok {
		return Result{}, fmt.Errorf("runner: unknown scenario %q (known: %v)", cfg.Scenario, Scenarios())
	}
	start := time.Now()
	res := Result{Scenario: cfg.Scenario, Seed: cfg.Seed, Faults: map[string]int{}, History: filepath.Join(cfg.Dir, "history.jsonl")}
	has := sc.needs
	rdk := 0
	if has.librdkafka {
		if err := workload.CheckLibrdkafka(workload.DefaultPython); err != nil {
			return res, fmt.Errorf("runner: scenario %s runs a librdkafka producer: %w", cfg.Scenario, err)
		}
		rdk = 1
	}
	c, err := startCluster(ctx, cfg, has)
	if errors.Is(err, cluster.ErrNoMount) && cfg.Scenario == soakName {
		// The soak runs without disk-full where tmpfs cannot be mounted.
		cfg.Logger.Warn().Err(err).Msg("no tmpfs data dirs: the soak runs without disk-full")
		has.disk = false
		c, err = startCluster(ctx, cfg, has)
	}
	if err != nil {
		return res, err
	}
	defer func() { _ = c.Stop() }()
	rec, err := history.Create(res.History, history.Header{Topic: topic, Seed: int64(cfg.Seed)})
	if err != nil {
		return res, err
	}
	defer func() { _ = rec.Close() }()
	w, err := workload.Run(ctx, workload.Config{Bootstrap: c.Bootstrap(), Topic: topic, Partitions: partitions,
		TopicConfigs: map[string]string{"segment.bytes": "262144", "remote.upload.bytes": "1048576",
			"remote.upload.max.delay.ms": "2000", "local.retention.ms": "5000",
			"retention.ms": "86400000"}, // a day: far beyond any clock jump
		Producers: 3, LibrdkafkaProducers: rdk, Rate: cfg.Rate, Group: group, Members: 3, Readers: true,
		Recorder: rec, Logger: cfg.Logger, Seed: cfg.Seed})
	if err != nil {
		return res, err
	}
	env := &faultEnv{c: c, w: w, rec: rec, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), res: &res, log: cfg.Logger,
		dir: cfg.Dir, has: has}
	runErr := sc.run(ctx, env, cfg.Duration)
	healErr := env.healAll(ctx)
	res.LagAcked = env.stopLag()
	res.Violations = env.stopNoisy()
	res.Violations = append(res.Violations, env.stopLarge(ctx)...)
	res.Violations = append(res.Violations, env.stopPoison(ctx)...)
	producersStopped := rec.Now()
	w.Stop()
	res.Stats = w.Stats()
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 3 * time.Minute
	}
	drainCtx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	defer cancel()
	drainErr := w.Drain(drainCtx)
	logErr := collectReplicas(drainCtx, c, rec)
	topics := []string{topic}
	if env.lag != nil {
		topics = append(topics, lagTopic)
	}
	res.OutOfSync = checkInSync(ctx, c, topics...)
	if env.lag != nil {
		res.OutOfSync = append(res.OutOfSync, checkLagReplicas(drainCtx, c)...)
	}
	if has.canary {
		res.CanaryFindings, res.Canary = checkCanaries(ctx, c, env.killed)
	}
	var tierErr error
	if cfg.Tierctl != "" {
		res.TieredRecords, tierErr = collectTiered(drainCtx, newTierctl(cfg.Tierctl, c), rec)
	}
	if err := rec.Close(); err != nil {
		return res, err
	}
	// A run that could not finish (a drain that never reached the high
	// watermark, say) is still checked as far as its history goes: a broken
	// broker often shows both. The error says the run is incomplete.
	incomplete := errors.Join(runErr, healErr, drainErr, logErr, tierErr)
	_, events, err := history.ReadFile(res.History)
	if err != nil {
		return res, errors.Join(incomplete, err)
	}
	res.Report = checker.Check(events)
	res.Stalls = consumeStalls(events, producersStopped)
	if sc.strict {
		res.Violations = append(res.Violations, strictChecks(res.Stats, res.Stalls)...)
	}
	res.UnexpectedExits = c.UnexpectedExits()
	res.Elapsed = time.Since(start)
	return res, incomplete
}

// unlistedReplicas lists the replicas of td on brokers md does not list.
func unlistedReplicas(md kadm.Metadata, td kadm.TopicDetail) []int32 {
	listed := md.Brokers.NodeIDs()
	var out []int32
	for _, pd := range td.Partitions {
		for _, id := range pd.Replicas {
			if !slices.Contains(listed, id) && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// Every broker of a run keeps what it has not fsynced in process memory
// (--crash-loses-unsynced), so every kill -9 loses it as a power cut would,
// and reads its clock offset from a file of the run (clock-jump).
// tmpfsBytes is the size of each data dir in scenarios with disk faults.
const tmpfsBytes = 256 << 20

// startCluster starts the cluster a scenario with parts has needs.
func startCluster(ctx context.Context, cfg Config, has needs) (*cluster.Cluster, error) {
	ccfg := cluster.Config{Dir: filepath.Join(cfg.Dir, "cluster"), Sluiced: cfg.Sluiced, VersityGW: cfg.VersityGW,
		PeerMesh: has.mesh, S3Proxy: has.s3, S3Faults: has.s3faults, ExternalEtcd: has.etcd || has.disk,
		Tenants:    has.tenants,
		ExtraArgs:  []string{"--crash-loses-unsynced"},
		BrokerArgs: func(id int32) []string { return []string{"--clock-offset-file", clockFile(cfg.Dir, id)} },
		Logger:     cfg.Logger, LogLevel: cfg.BrokerLogLevel}
	if has.canary {
		ccfg.ExtraArgs = append(ccfg.ExtraArgs, canaryArgs...)
	}
	if has.disk {
		ccfg.DataDirBytes = tmpfsBytes
		// Journal files are preallocated: keep them small on a small disk.
		ccfg.ExtraArgs = append(ccfg.ExtraArgs, "--journal-file-bytes", "4194304")
	}
	if _, err := os.Stat(ccfg.Dir); err == nil {
		// A first attempt that failed (no tmpfs) left its directory.
		if err := os.RemoveAll(ccfg.Dir); err != nil {
			return nil, err
		}
	}
	return cluster.Start(ctx, ccfg)
}

// collectReplicas records every replica's log of every partition.
func collectReplicas(ctx context.Context, c *cluster.Cluster, rec *history.Recorder) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// A broker that was paused or restarted late in the run may not be
	// registered again yet: the Metadata then names it as a replica but
	// not among the brokers, and the client cannot address it. Wait for
	// every replica's broker to be listed (within ctx).
	var md kadm.Metadata
	var td kadm.TopicDetail
	for {
		md, err = adm.Metadata(ctx, topic)
		if err != nil {
			return fmt.Errorf("runner: metadata: %w", err)
		}
		var ok bool
		if td, ok = md.Topics[topic]; !ok {
			return fmt.Errorf("runner: topic %s missing from metadata", topic)
		}
		if missing := unlistedReplicas(md, td); len(missing) == 0 {
			break
		} else if ctx.Err() != nil {
			return fmt.Errorf("runner: replicas on brokers %v never listed in metadata: %w", missing, ctx.Err())
		}
		sleep(ctx, 500*time.Millisecond)
	}
	var errs []error
	for _, pd := range td.Partitions.Sorted() {
		for _, id := range pd.Replicas {
			log, err := replicas.Collect(ctx, cl, topic, td.ID, pd.Partition, id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if err := rec.Record(log); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
