// Command chaos runs a fault scenario against a real three-broker Sluice
// cluster and checks every acknowledged record (chaos/runner), or checks a
// recorded history again.
//
//	chaos run   --scenario leader-kill --duration 60s --seed 1 --dir DIR
//	chaos check DIR/history.jsonl
//
//	chaos --version
//	chaos --help | -h | help [COMMAND]
//
// Exit status: 0 no anomaly, 1 anomalies (or a broker that died by
// itself), 2 the run could not be carried out, or a mistake on the command
// line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/chaos/checker"
	"github.com/sluice-mq/sluice/chaos/history"
	"github.com/sluice-mq/sluice/chaos/runner"
	"github.com/sluice-mq/sluice/cmd/internal/cli"
	"github.com/sluice-mq/sluice/cmd/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one chaos command; run and the usage come from this table,
// and TestHelpConventions walks it.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"run", "run a fault scenario against a three-broker cluster and check it", runScenario},
	{"check", "check a recorded history again (HISTORY.jsonl)", func(_ context.Context, args []string, stdout, stderr io.Writer) int {
		return check(args, stdout, stderr)
	}},
}

// names lists the commands, "run, check".
func names() string {
	var ns []string
	for _, c := range commands {
		ns = append(ns, c.name)
	}
	return strings.Join(ns, ", ")
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: chaos command [flags] [args]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-6s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\n'chaos COMMAND --help' (or 'chaos help COMMAND') lists a command's flags.\n"+
		"exit status: 0 no anomaly, 1 anomalies, 2 the run could not be carried out or a command-line mistake\n")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: chaos %s ... (chaos --help)\n", strings.ReplaceAll(names(), ", ", "|"))
		return 2
	}
	if cli.IsHelp(args[0]) {
		if args[0] == "help" && len(args) > 1 { // help COMMAND
			return run(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return 0
	}
	switch args[0] {
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, version.String("chaos"))
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "chaos: unknown command %q (%s; chaos --help)\n", args[0], names())
	return 2
}

func runScenario(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := runner.Config{}
	fs.StringVar(&cfg.Scenario, "scenario", "leader-kill", fmt.Sprintf("one of %v", runner.Scenarios()))
	fs.DurationVar(&cfg.Duration, "duration", 60*time.Second, "how long faults are injected while the workload runs")
	fs.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()), "seed of the fault schedule and the workload")
	fs.StringVar(&cfg.Dir, "dir", "", "work directory (default: a new one in the system's temp dir)")
	fs.StringVar(&cfg.Sluiced, "sluiced", "bin/sluiced", "the broker binary")
	fs.StringVar(&cfg.VersityGW, "versitygw", "bin/versitygw", "Versity's S3 gateway (make tools)")
	fs.StringVar(&cfg.BrokerLogLevel, "broker-log-level", "info", "the brokers' --log-level (debug shows each replica's fetches and truncations)")
	fs.StringVar(&cfg.Tierctl, "tierctl", "bin/tierctl", "tierctl, which re-reads every partition from object storage after the drain (empty: skip)")
	fs.IntVar(&cfg.Rate, "rate", 400, "sends per second")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: chaos run [flags]\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, version.Usage("chaos run", fmt.Sprintf("unexpected argument %q (chaos run takes only flags)", fs.Arg(0))))
		return 2
	}
	tempDir := cfg.Dir == ""
	if tempDir {
		d, err := os.MkdirTemp("", "sluice-chaos-")
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		cfg.Dir = d
	}
	for _, p := range []*string{&cfg.Sluiced, &cfg.VersityGW, &cfg.Tierctl} {
		if *p == "" {
			continue
		}
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	cfg.Logger = zerolog.New(zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.TimeOnly}).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	res, err := runner.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "chaos: %s (seed %d): %v\nhistory: %s\n", cfg.Scenario, cfg.Seed, err, res.History)
		if res.Report.Total() > 0 {
			fmt.Fprintln(stdout, "the run did not finish; what its history shows so far:")
			_ = res.Report.WriteText(stdout)
		}
		return 2
	}
	fmt.Fprintf(stdout, "scenario %s, seed %d, %v, history %s\n", res.Scenario, res.Seed, res.Elapsed.Round(time.Second), res.History)
	fmt.Fprintf(stdout, "sends: %d acknowledged (%.0f/s), %d failed, %d unknown; polls %d; commits %d\n",
		res.Stats.SendsOK, res.Stats.AckedPerSecond, res.Stats.SendsFailed, res.Stats.SendsUnknown, res.Stats.Polls, res.Stats.Commits)
	if st := res.Stats; st.LibrdkafkaOK+st.LibrdkafkaNotOK > 0 {
		fmt.Fprintf(stdout, "of them, librdkafka's: %d acknowledged, %d failed or unknown\n", st.LibrdkafkaOK, st.LibrdkafkaNotOK)
	}
	fmt.Fprintf(stdout, "faults: %v; recoveries: %v; re-read from object storage: %d records\n", res.Faults, res.Recoveries, res.TieredRecords)
	fmt.Fprintf(stdout, "consumer group's longest stall while producing: %v without any record; %v on partition %d alone\n",
		res.Stalls.Any.Round(time.Millisecond), res.Stalls.Partition.Round(time.Millisecond), res.Stalls.PartitionOf)
	for _, e := range res.UnexpectedExits {
		fmt.Fprintf(stdout, "unexpected exit: %v\n", e)
	}
	if res.LagAcked > 0 {
		fmt.Fprintf(stdout, "lagging-follower side topic: %d acknowledged\n", res.LagAcked)
	}
	for _, s := range res.OutOfSync {
		fmt.Fprintf(stdout, "not healed: %s\n", s)
	}
	for _, s := range res.Violations {
		fmt.Fprintf(stdout, "violation: %s\n", s)
	}
	for _, s := range res.Canary {
		fmt.Fprintln(stdout, s)
	}
	for _, s := range res.CanaryFindings {
		fmt.Fprintf(stdout, "canary: %s\n", s)
	}
	if err := res.Report.WriteText(stdout); err != nil {
		return 2
	}
	if len(res.OutOfSync) > 0 {
		fmt.Fprintf(stdout, "FAILED: %d partitions or replicas had not healed a minute after the drain\n", len(res.OutOfSync))
	}
	if len(res.Violations) > 0 {
		fmt.Fprintf(stdout, "FAILED: %d violations (quotas, fairness, large payloads, or a rolling restart's failed sends or stall)\n", len(res.Violations))
	}
	if len(res.CanaryFindings) > 0 {
		fmt.Fprintf(stdout, "FAILED: %d canary findings\n", len(res.CanaryFindings))
	}
	if !res.OK() {
		return 1
	}
	if tempDir {
		// A passing run's brokers, etcd and S3 data (about a gigabyte) are
		// of no further use; its history stays for whoever wants to read it.
		if err := removeAllBut(cfg.Dir, res.History); err != nil {
			fmt.Fprintf(stderr, "chaos: removing the run's data: %v\n", err)
		}
	}
	return 0
}

// removeAllBut removes every entry of dir except the file keep.
func removeAllBut(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if p := filepath.Join(dir, e.Name()); p != keep {
			errs = append(errs, os.RemoveAll(p))
		}
	}
	return errors.Join(errs...)
}

func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "the report as JSON")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: chaos check [--json] HISTORY.jsonl\n\nflags:\n")
		fs.PrintDefaults()
	}
	err := cli.Parse(fs, args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: chaos check [--json] HISTORY.jsonl")
		return 2
	}
	_, events, err := history.ReadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	rep := checker.Check(events)
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return 2
	}
	if !rep.OK() {
		return 1
	}
	return 0
}
