// Command loadgen drives a Kafka-protocol cluster (or NATS JetStream, for
// comparison) with a named scenario and reports throughput, latency and
// lag. See `loadgen -h` and package loadgen.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/cmd/internal/cli"
	"github.com/sluice-mq/sluice/cmd/internal/version"
	"github.com/sluice-mq/sluice/loadgen"
)

func main() {
	os.Exit(exitCode(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

// exitCode turns run's error into the exit status, reporting a failure on
// stderr: 0 ok or help, 2 a command-line mistake (already reported, with
// usage), 1 a failed run.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintln(stderr, "loadgen:", err)
	return 1
}

// errUsage marks a mistake on the command line, already reported on
// stderr (exit status 2).
var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer) error {
	cfg := loadgen.DefaultConfig()
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	showVersion := fs.Bool("version", false, "print the version and exit")
	brokers := fs.String("brokers", strings.Join(cfg.Brokers, ","), "comma-separated Kafka bootstrap addresses (--system http: for consumers only, none unless given)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	quiet := fs.Bool("quiet", false, "no live progress line")
	fs.StringVar(&cfg.System, "system", cfg.System, "kafka, jetstream or http (Sluice's HTTP publish API)")
	fs.StringVar(&cfg.NATSURL, "nats-url", cfg.NATSURL, "NATS server URL (--system jetstream)")
	fs.StringVar(&cfg.HTTPURL, "http-url", cfg.HTTPURL, "HTTP API base URL (--system http)")
	fs.IntVar(&cfg.HTTPBatch, "http-batch", cfg.HTTPBatch, "messages per publish request (--system http)")
	fs.StringVar(&cfg.Security.TLSCAFile, "tls-ca-file", "", "Kafka over TLS, the listener's certificate checked with this PEM CA")
	fs.BoolVar(&cfg.Security.TLS, "tls", false, "Kafka over TLS with the system's roots (or --tls-ca-file)")
	fs.StringVar(&cfg.Security.SASLMechanism, "sasl-mechanism", "", "SASL: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN (Kafka)")
	fs.StringVar(&cfg.Security.SASLUser, "sasl-user", "", "SASL user")
	fs.StringVar(&cfg.Security.SASLPasswordFile, "sasl-password-file", "", "file whose first line is the SASL password")
	fs.StringVar(&cfg.Label, "label", "", "free text carried into the report, e.g. the server's sync policy")
	fs.StringVar(&cfg.Scenario, "scenario", cfg.Scenario, "one of: "+strings.Join(loadgen.Scenarios(), ", "))
	fs.StringVar(&cfg.Topic, "topic", "", "topic (stream) to create and use (default: loadgen-<scenario>-<nanos>)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the topic")
	fs.IntVar(&cfg.ReplicationFactor, "replication-factor", cfg.ReplicationFactor, "replication factor of the topic; -1: the broker's default (kafka, http)")
	fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "producer clients")
	fs.IntVar(&cfg.Consumers, "consumers", cfg.Consumers, "consumer members (0: produce only)")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "target records/s over all producers, open loop; 0: as fast as possible")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of the (first) production phase")
	fs.StringVar(&cfg.Sizes, "sizes", "", "payload sizes: fixed:N | uniform:A-B | mix:S*W,S*W,... (k/KiB/m/MiB; default per scenario)")
	fs.StringVar(&cfg.Keys, "keys", "", "keys: none | uniform:N | zipf:N[:S] (default per scenario)")
	fs.DurationVar(&cfg.Linger, "linger", cfg.Linger, "producer linger (Kafka)")
	fs.IntVar(&cfg.BatchBytes, "batch-bytes", cfg.BatchBytes, "largest record batch (Kafka)")
	fs.BoolVar(&cfg.Idempotent, "idempotent", cfg.Idempotent, "idempotent producer (JetStream: Nats-Msg-Id de-duplication)")
	fs.StringVar(&cfg.Acks, "acks", cfg.Acks, "all, leader or none (Kafka)")
	fs.IntVar(&cfg.InFlight, "in-flight", cfg.InFlight, "records a producer may have unacknowledged (http: /http-batch = requests in flight, at most 128)")
	fs.StringVar(&cfg.ConsumerMode, "consumer-mode", cfg.ConsumerMode, "auto (group if supported), group or assign")
	fs.StringVar(&cfg.Group, "group", "", "consumer group (default: loadgen-<topic>)")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", cfg.SessionTimeout, "group session timeout (JetStream: AckWait)")
	fs.DurationVar(&cfg.CommitInterval, "commit-interval", cfg.CommitInterval, "group auto-commit interval")
	fs.Float64Var(&cfg.PeakFactor, "peak-factor", cfg.PeakFactor, "peak: rate multiplier during the peak")
	fs.DurationVar(&cfg.PeakDuration, "peak-duration", 0, "peak: length of the peak (default duration/3)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "longest wait for a drain or catch-up")
	fs.IntVar(&cfg.Prefill, "prefill", 0, "replay: records written first (default rate*duration)")
	fs.DurationVar(&cfg.CrashAfter, "crash-after", 0, "consumer-crash: when member 0 is killed (default duration/3)")
	fs.BoolVar(&cfg.Cleanup, "cleanup", cfg.Cleanup, "delete the topic at the end")
	fs.DurationVar(&cfg.Interval, "interval", cfg.Interval, "sampling interval of the progress line, CSV and SVG")
	fs.BoolVar(&cfg.JSON, "json", false, "print the result as JSON")
	fs.StringVar(&cfg.CSVPath, "csv", "", "write the per-interval series to this CSV file")
	fs.StringVar(&cfg.SVGPath, "svg", "", "write a chart of throughput, latency and lag to this SVG file")
	var tenants []loadgen.Tenant
	fs.Func("tenant", "a tenant of a multi-tenant run, repeatable: name=N[,role=writer|replay][,user=U,password-file=F][,mechanism=M]"+
		"[,rate=R][,topic=T][,producers=N][,consumers=N][,partitions=N][,prefill=N][,tiered=true]; other flags are every tenant's defaults", func(v string) error {
		t, err := loadgen.ParseTenant(v)
		tenants = append(tenants, t)
		return err
	})
	alone := fs.Bool("alone", false, "tenants: run each tenant alone first, then all together")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadgen [flags]\n\nscenarios:\n")
		for _, s := range loadgen.Scenarios() {
			fmt.Fprintf(fs.Output(), "  %-15s %s\n", s, loadgen.ScenarioHelp(s))
		}
		fmt.Fprintf(fs.Output(), "  %-15s %s\n", loadgen.ScenarioNoisyNeighbour, "three tenants (--tenant name=noisy|quiet|replay,... sets their credentials and rates): "+
			"noisy as fast as it can, quiet at --rate with a tail reader, replay reading its topic from offset 0")
		fmt.Fprintln(fs.Output(), "\nflags:")
		fs.PrintDefaults()
	}
	if len(args) == 1 && args[0] == "help" {
		args = []string{"--help"}
	}
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.String("loadgen"))
		return nil
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, version.Usage("loadgen", fmt.Sprintf("unexpected argument %q (loadgen takes only flags)", fs.Arg(0))))
		return errUsage
	}
	cfg.Brokers = strings.Split(*brokers, ",")
	consumersSet, brokersSet := false, false
	fs.Visit(func(f *flag.Flag) {
		consumersSet = consumersSet || f.Name == "consumers"
		brokersSet = brokersSet || f.Name == "brokers"
	})
	if cfg.System == loadgen.SystemHTTP && !brokersSet {
		cfg.Brokers = nil // http consumes over Kafka only from the brokers it is given
	}
	if cfg.Scenario == loadgen.ScenarioConsumerCrash && !consumersSet {
		cfg.Consumers = 3 // a crash needs survivors
	}
	cfg.Progress = !*quiet
	level, err := zerolog.ParseLevel(*logLevel)
	if err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	logger := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(level).With().Timestamp().Logger()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if cfg.Scenario == loadgen.ScenarioNoisyNeighbour || len(tenants) > 0 {
		m, err := newTenants(cfg, tenants, *alone, logger, stdout, stderr)
		if err != nil {
			return err
		}
		return m.Run(ctx)
	}
	r, err := loadgen.New(cfg, logger)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// newTenants makes the multi-tenant run of --tenant and --scenario
// noisy-neighbour; the other flags are each tenant's defaults.
func newTenants(cfg loadgen.Config, tenants []loadgen.Tenant, alone bool, logger zerolog.Logger, stdout, stderr io.Writer) (*loadgen.Tenants, error) {
	if cfg.Scenario == loadgen.ScenarioNoisyNeighbour {
		var err error
		if tenants, err = loadgen.NoisyNeighbour(tenants); err != nil {
			return nil, err
		}
	} else if cfg.Scenario != loadgen.ScenarioSteady {
		return nil, fmt.Errorf("%w: --tenant runs the steady scenario (role=writer) or replay (role=replay), or --scenario %s; not %s",
			loadgen.ErrInvalidConfig, loadgen.ScenarioNoisyNeighbour, cfg.Scenario)
	}
	return loadgen.NewTenants(cfg, tenants, alone, logger, stdout, stderr)
}
