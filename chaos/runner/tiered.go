package runner

// tiered.go owns the tiered re-read: once the drain is done, every
// partition's objects are read back straight from the bucket with
// `tierctl dump` (a separate process that reads the remote index in etcd and
// the objects in S3, as an operator would; the runner never imports tier)
// and recorded as tiered-read events, which the checker compares with the
// final log (tiered-read-mismatch).
//
// Invariant: a tiered-read event covers exactly [from, to) of the remote
// index as tierctl stat reported it, and holds every record tierctl dump
// returned in that range; nothing is recorded for a partition with no
// objects.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"

	"github.com/sluice-mq/sluice/chaos/cluster"
	"github.com/sluice-mq/sluice/chaos/history"
)

// tieredProcess is the process id of tiered-read events.
const tieredProcess history.Process = 9000

// tierctl runs bin/tierctl against the cluster's etcd and bucket.
type tierctl struct {
	path      string
	endpoints string
	store     string
	env       []string
}

func newTierctl(path string, c *cluster.Cluster) tierctl {
	s3 := c.S3()
	return tierctl{path: path, endpoints: c.EtcdEndpoints(), store: s3.URL(), env: s3.ChildEnv()}
}

// run runs one tierctl command with --json and decodes its output into out.
func (t tierctl) run(ctx context.Context, out any, args ...string) error {
	full := append([]string{"--json", "--etcd-endpoints", t.endpoints, "--object-store", t.store}, args...)
	cmd := exec.CommandContext(ctx, t.path, full...)
	cmd.Env = t.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("runner: tierctl %v: %w: %s", args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("runner: tierctl %v: output: %w", args, err)
	}
	return nil
}

// tierStat is the part of `tierctl stat --json` the re-read needs.
type tierStat struct {
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		LogStart  int64  `json:"log_start"`
		RemoteEnd int64  `json:"remote_end"`
	} `json:"partitions"`
}

// tierDump is `tierctl dump --json`. Keys and values are text: the workload
// writes UTF-8 only, so a {"base64": …} value fails the decode, as it should.
type tierDump struct {
	Records []struct {
		Offset int64  `json:"offset"`
		Key    string `json:"key"`
		Value  string `json:"value"`
	} `json:"records"`
}

// collectTiered re-reads every partition's remote range and records it. It
// returns how many records were re-read.
func collectTiered(ctx context.Context, t tierctl, rec *history.Recorder) (int, error) {
	total := 0
	for p := range partitions {
		name := topic + "/" + strconv.Itoa(p)
		var st tierStat
		if err := t.run(ctx, &st, "stat", name); err != nil {
			return total, err
		}
		if len(st.Partitions) != 1 {
			return total, fmt.Errorf("runner: tierctl stat %s: %d partitions in the answer", name, len(st.Partitions))
		}
		from, to := st.Partitions[0].LogStart, st.Partitions[0].RemoteEnd
		if to <= from {
			continue
		}
		invoke := rec.Now()
		var d tierDump
		if err := t.run(ctx, &d, "dump", name, "--offset", strconv.FormatInt(from, 10), "--count", strconv.FormatInt(to-from, 10)); err != nil {
			return total, err
		}
		ev := history.TieredRead{Process: tieredProcess, Partition: history.Partition(p), From: history.Offset(from), To: history.Offset(to),
			Invoke: invoke, Complete: rec.Now(), Records: []history.Record{}}
		for _, r := range d.Records {
			if r.Offset >= to {
				break
			}
			ev.Records = append(ev.Records, history.Record{Offset: history.Offset(r.Offset), Key: r.Key, Value: r.Value, LeaderEpoch: history.NoEpoch})
		}
		if err := rec.Record(ev); err != nil {
			return total, err
		}
		total += len(ev.Records)
	}
	return total, nil
}
