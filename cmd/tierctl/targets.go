package main

// targets.go owns naming partitions on the command line: "topic/partition",
// "topic" (all its partitions) or nothing (every partition of every topic),
// resolved through the topic records in etcd, with each partition's remote
// index head.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-mq/sluice/meta"
)

// target is one partition and its head as read now.
type target struct {
	topic meta.Topic
	n     int32
	head  meta.RemoteHead
}

func (t target) String() string { return fmt.Sprintf("%s/%d", t.topic.Name, t.n) }

// topicID is the topic ID as the keys and directories spell it.
func (t target) topicID() string { return uuid.UUID(t.topic.ID).String() }

// splitSpec parses "topic[/partition]"; partition is -1 when absent.
func splitSpec(spec string) (topic string, partition int32, err error) {
	name, num, found := strings.Cut(spec, "/")
	if !found {
		return name, -1, nil
	}
	n, perr := strconv.ParseInt(num, 10, 32)
	if perr != nil || n < 0 {
		return "", 0, usagef("%q: want topic/partition with a partition number >= 0", spec)
	}
	return name, int32(n), nil
}

// targets resolves a spec ("" for every topic) to partitions with heads.
func (e *env) targets(ctx context.Context, spec string) ([]target, error) {
	var topics []meta.Topic
	part := int32(-1)
	if spec == "" {
		ts, err := e.meta.Topics(ctx)
		if err != nil {
			return nil, err
		}
		topics = ts
	} else {
		name, n, err := splitSpec(spec)
		if err != nil {
			return nil, err
		}
		t, err := e.meta.Topic(ctx, name)
		if errors.Is(err, meta.ErrTopicNotFound) || errors.Is(err, meta.ErrInvalidTopic) {
			return nil, usagef("no topic %q", name)
		}
		if err != nil {
			return nil, err
		}
		if n >= t.Partitions {
			return nil, usagef("topic %q has %d partitions, no partition %d", name, t.Partitions, n)
		}
		topics, part = []meta.Topic{t}, n
	}
	var out []target
	for _, t := range topics {
		for n := range t.Partitions {
			if part >= 0 && n != part {
				continue
			}
			h, err := e.meta.RemoteHead(ctx, t.ID, n)
			if err != nil {
				return nil, err
			}
			out = append(out, target{topic: t, n: n, head: h})
		}
	}
	return out, nil
}

// onePartitionArg checks the positional arguments of dump and export: one
// topic/partition, refused before anything is connected.
func onePartitionArg(args []string) error {
	if len(args) != 1 {
		return usagef("want one topic/partition, got %d arguments", len(args))
	}
	if _, n, err := splitSpec(args[0]); err != nil || n < 0 {
		return usagef("%q: want topic/partition", args[0])
	}
	return nil
}

// onePartition resolves a spec that must name one partition.
func (e *env) onePartition(ctx context.Context, args []string) (target, error) {
	if err := onePartitionArg(args); err != nil {
		return target{}, err
	}
	ts, err := e.targets(ctx, args[0])
	if err != nil {
		return target{}, err
	}
	return ts[0], nil
}

// optionalSpec is the at most one positional argument of ls, stat, verify
// and retention.
func optionalSpec(args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", nil
	case 1:
		return args[0], nil
	}
	return "", usagef("want at most one topic[/partition], got %v", args)
}

// walDir is where a broker keeps a partition's log: broker.walDir's layout,
// <data-dir>/wal/<topic id>/<partition>.
func walDir(dataDir string, topicID [16]byte, n int32) string {
	return filepath.Join(dataDir, "wal", uuid.UUID(topicID).String(), strconv.Itoa(int(n)))
}

// connectTargets connects to etcd and the object store and resolves the
// optional topic[/partition] argument to the partitions it names: the
// start of ls, stat and verify.
func (e *env) connectTargets(ctx context.Context, args []string) ([]target, error) {
	spec, err := optionalSpec(args)
	if err != nil {
		return nil, err
	}
	if err := e.connect(ctx, true); err != nil {
		return nil, err
	}
	return e.targets(ctx, spec)
}
