package main

// broker.go owns the commands an operator runs around a broker's stop:
//
//	sluicectl broker ls              the brokers with AZ, liveness, drain and leaders
//	sluicectl broker drain N         move leaderships and groups off broker N,
//	                                 waiting (--wait) until it leads nothing and
//	                                 coordinates no group, then naming where each
//	                                 leadership and group went (drain.go)
//	sluicectl broker undrain N       let it lead again
//	sluicectl leader elect --preferred [--topic T]
//	                                 move leaderships back to the preferred replicas now
//
// A rolling restart is drain, stop, start (which clears the broker's drain
// mark), wait for /readyz, then the next broker; a preferred election at
// the end spreads the leaderships back.

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"
)

type brokerListing struct {
	ID         int32  `json:"id"`
	AZ         string `json:"az"`
	Kafka      string `json:"kafka"`
	Controller bool   `json:"controller"`
	Live       bool   `json:"live"`
	Draining   bool   `json:"draining"`
	Leaders    int    `json:"leaders"`
}

type brokerList struct {
	Controller int32           `json:"controller"`
	Brokers    []brokerListing `json:"brokers"`
}

func (e *env) brokers(ctx context.Context) (brokerList, error) {
	var out brokerList
	err := e.call(ctx, "GET", "/v1/brokers", nil, nil, &out)
	return out, err
}

func brokerLsFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		out, err := e.brokers(ctx)
		if err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(out)
		}
		tw := e.table()
		fmt.Fprintln(tw, "ID\tAZ\tLIVE\tCONTROLLER\tDRAINING\tLEADERS\tKAFKA")
		for _, b := range out.Brokers {
			fmt.Fprintf(tw, "%d\t%s\t%v\t%v\t%v\t%d\t%s\n", b.ID, orDash(b.AZ), b.Live, b.Controller, b.Draining, b.Leaders, orDash(b.Kafka))
		}
		return tw.Flush()
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func nodeArg(args []string) (int32, error) {
	if err := positional(args, "N"); err != nil {
		return 0, err
	}
	id, err := strconv.ParseInt(args[0], 10, 32)
	if err != nil || id < 0 {
		return 0, usagef("broker %q: want a node id", args[0])
	}
	return int32(id), nil
}

func brokerDrainFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	wait := fs.Bool("wait", true, "wait until the broker leads no partition")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up waiting after this long (exit 1)")
	return func(ctx context.Context, e *env, args []string) error {
		id, err := nodeArg(args)
		if err != nil {
			return err
		}
		var before heldBy
		if *wait {
			// What it holds now, to say afterwards where each went.
			if before, err = e.held(ctx, id); err != nil {
				return err
			}
		}
		if err := e.call(ctx, "POST", "/v1/admin/brokers/"+strconv.Itoa(int(id))+"/drain", nil, nil, nil); err != nil {
			return err
		}
		if !*wait {
			return e.drainResult(id)
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		last := -1
		for {
			out, err := e.brokers(ctx)
			if err == nil {
				n := 0
				for _, b := range out.Brokers {
					if b.ID == id {
						n = b.Leaders
					}
				}
				if n != last && !e.json {
					fmt.Fprintf(e.stderr, "broker %d leads %d partitions\n", id, n)
				}
				last = n
				if n == 0 {
					// Group placement follows the drain marks on each
					// broker's next read of them (every second); whereNow
					// then waits until each group it held is served
					// elsewhere.
					select {
					case <-ctx.Done():
					case <-time.After(2 * time.Second):
					}
					parts, groups, err := e.whereNow(ctx, id, before)
					if err != nil {
						return fmt.Errorf("broker %d leads no partition, but %w", id, err)
					}
					return e.drained(id, parts, groups)
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("broker %d still leads %d partitions after %v: those no other replica can lead (not live, not caught up, or a replication factor of 1); `sluicectl broker ls` shows them", id, last, *timeout)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// drainResult reports a drain not waited for (--wait=false).
func (e *env) drainResult(id int32) error {
	if e.json {
		return e.writeJSON(map[string]any{"broker": id, "draining": true, "leaders": -1})
	}
	fmt.Fprintf(e.stdout, "broker %d draining\n", id)
	return nil
}

func brokerUndrainFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		id, err := nodeArg(args)
		if err != nil {
			return err
		}
		if err := e.call(ctx, "DELETE", "/v1/admin/brokers/"+strconv.Itoa(int(id))+"/drain", nil, nil, nil); err != nil {
			return err
		}
		return e.done("undrained broker", strconv.Itoa(int(id)))
	}
}

func leaderElectFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	preferred := fs.Bool("preferred", false, "move each partition's leadership to its preferred replica (the only kind of election this command starts)")
	topic := fs.String("topic", "", "only this topic's partitions (default: every partition)")
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		if !*preferred {
			return usagef("--preferred is required (an unclean election is POST /v1/admin/partitions/{topic}/{partition}/elections:unclean)")
		}
		var body any
		if *topic != "" {
			body = map[string]string{"topic": *topic}
		}
		var out struct {
			Partitions int    `json:"partitions"`
			Controller int32  `json:"controller"`
			Message    string `json:"message"`
		}
		if err := e.call(ctx, "POST", "/v1/admin/elections:preferred", nil, body, &out); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(out)
		}
		fmt.Fprintf(e.stdout, "preferred election asked of %d partitions (controller %d)\n", out.Partitions, out.Controller)
		return nil
	}
}
