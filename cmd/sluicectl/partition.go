package main

// partition.go owns the partition reassignment commands (KIP-455's shape,
// over the HTTP admin API):
//
//	sluicectl partition reassign TOPIC PARTITION --replicas 1,2,4
//	                                 move the replicas; --wait follows it to the end
//	sluicectl partition reassignments  the pending ones and the step each is at
//	sluicectl partition cancel TOPIC PARTITION
//	                                 move back to the original replicas
//
// The broker refuses a target that breaks a rule (an unknown or dead
// broker, two replicas in one AZ, another replication factor) with the
// rule; sluicectl prints it and exits 1.

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

type reassignment struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Target      []int32 `json:"target"`
	Original    []int32 `json:"original"`
	Replicas    []int32 `json:"replicas"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Adding      []int32 `json:"adding"`
	Removing    []int32 `json:"removing"`
	Cancelled   bool    `json:"cancelled"`
	Phase       string  `json:"phase"`
	Message     string  `json:"message"`
}

type reassignmentList struct {
	Reassignments []reassignment `json:"reassignments"`
}

// partitionArgs parses TOPIC PARTITION.
func partitionArgs(args []string) (string, int32, error) {
	if err := positional(args, "TOPIC", "PARTITION"); err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseInt(args[1], 10, 32)
	if err != nil || n < 0 {
		return "", 0, usagef("partition %q: want a partition number", args[1])
	}
	return args[0], int32(n), nil
}

// parseIDs parses "1,2,4".
func parseIDs(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || id < 0 {
			return nil, usagef("--replicas %q: want node ids separated by commas, the preferred leader first", s)
		}
		out = append(out, int32(id))
	}
	return out, nil
}

func reassignPath(topic string, n int32) string {
	return "/v1/admin/partitions/" + url.PathEscape(topic) + "/" + strconv.Itoa(int(n)) + "/reassign"
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

func partitionReassignFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	replicas := fs.String("replicas", "", "the target node ids, the preferred leader first (required)")
	wait := fs.Bool("wait", false, "wait until the reassignment is done")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up waiting after this long (exit 1)")
	return func(ctx context.Context, e *env, args []string) error {
		topic, n, err := partitionArgs(args)
		if err != nil {
			return err
		}
		if *replicas == "" {
			return usagef("--replicas is required")
		}
		target, err := parseIDs(*replicas)
		if err != nil {
			return err
		}
		var out reassignment
		if err := e.call(ctx, "POST", reassignPath(topic, n), nil, map[string]any{"replicas": target}, &out); err != nil {
			return err
		}
		if !*wait {
			if e.json {
				return e.writeJSON(out)
			}
			fmt.Fprintf(e.stdout, "%s-%d: reassignment to [%s] stored (original [%s]); `sluicectl partition reassignments` shows its step\n",
				topic, n, joinIDs(out.Target), joinIDs(out.Original))
			return nil
		}
		return e.waitReassigned(ctx, topic, n, target, *timeout)
	}
}

// waitReassigned polls the pending reassignments until topic-n's is gone.
func (e *env) waitReassigned(ctx context.Context, topic string, n int32, target []int32, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		var list reassignmentList
		err := e.call(ctx, "GET", "/v1/admin/reassignments", nil, nil, &list)
		if err == nil {
			i := slices.IndexFunc(list.Reassignments, func(r reassignment) bool { return r.Topic == topic && r.Partition == n })
			if i < 0 {
				if e.json {
					return e.writeJSON(map[string]any{"topic": topic, "partition": n, "replicas": target, "done": true})
				}
				fmt.Fprintf(e.stdout, "%s-%d: reassigned to [%s]\n", topic, n, joinIDs(target))
				return nil
			}
			r := list.Reassignments[i]
			if line := fmt.Sprintf("%s: replicas [%s], leader %d: %s", r.Phase, joinIDs(r.Replicas), r.Leader, r.Message); line != last && !e.json {
				fmt.Fprintf(e.stderr, "%s-%d %s\n", topic, n, line)
				last = line
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s-%d: reassignment not done after %v (last: %s); it goes on: `sluicectl partition reassignments` shows it, `sluicectl partition cancel` moves back", topic, n, timeout, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func partitionReassignmentsFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		var list reassignmentList
		if err := e.call(ctx, "GET", "/v1/admin/reassignments", nil, nil, &list); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(list)
		}
		tw := e.table()
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tREPLICAS\tTARGET\tORIGINAL\tLEADER\tPHASE\tMESSAGE")
		for _, r := range list.Reassignments {
			phase := r.Phase
			if r.Cancelled {
				phase += " (cancelled)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", orDash(r.Topic), r.Partition, joinIDs(r.Replicas),
				joinIDs(r.Target), joinIDs(r.Original), r.Leader, phase, r.Message)
		}
		return tw.Flush()
	}
}

func partitionCancelFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		topic, n, err := partitionArgs(args)
		if err != nil {
			return err
		}
		var out reassignment
		if err := e.call(ctx, "DELETE", reassignPath(topic, n), nil, nil, &out); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(out)
		}
		fmt.Fprintf(e.stdout, "%s-%d: reassignment cancelled: moving back to [%s]\n", topic, n, joinIDs(out.Target))
		return nil
	}
}
