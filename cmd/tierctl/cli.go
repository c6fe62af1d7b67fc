package main

// cli.go owns the command line: the command table, the global flags every
// command accepts (before or after its name), the connection to etcd and the
// object store, and the exit status.
//
// Exit status: 0 ok; 1 problems found (errProblems: verify, diff); 2 usage
// errors and anything that kept a command from finishing (etcd or the store
// unreachable, a corrupt head).
//
// An env belongs to one run; it is used by one goroutine.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/cmd/internal/cli"
	"github.com/sluice-mq/sluice/cmd/internal/version"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/open"
	"github.com/sluice-mq/sluice/wal"
)

// errProblems marks a command that ran and found problems (exit status 1).
var errProblems = errors.New("problems found")

// usageError is a mistake on the command line (exit status 2, with usage).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// command is one subcommand.
type command struct {
	name    string
	args    string // positional arguments, for the usage line
	summary string
	// flags registers the command's own flags; run gets the positional
	// arguments once every flag is parsed.
	flags func(fs *flag.FlagSet) func(ctx context.Context, e *env, args []string) error
}

var commands = []command{
	{"ls", "[topic[/partition]]", "list local segments and remote objects", lsFlags},
	{"stat", "[topic[/partition]]", "watermarks, counts and sizes per partition", statFlags},
	{"verify", "[topic[/partition]]", "check remote objects against the index (and local segments with --data-dir)", verifyFlags},
	{"dump", "topic/partition", "print decoded records from an offset", dumpFlags},
	{"diff", "", "compare the bucket with etcd: orphans, missing objects, foreign keys", diffFlags},
	{"retention", "[topic[/partition]]", "show what the retention state machine would delete now, and why", retentionFlags},
	{"export", "topic/partition", "write records [from, to) as Arrow IPC or Parquet", exportFlags},
	{"objects", "", "list large payloads: their sessions, references and retention plan", objectsFlags},
}

// globals are the flags every command takes.
type globals struct {
	endpoints   string
	objectStore string
	dataDir     string
	prefix      string
	json        bool
	timeout     time.Duration
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.endpoints, "etcd-endpoints", g.endpoints, "comma-separated URLs of the cluster's etcd (required)")
	fs.StringVar(&g.objectStore, "object-store", g.objectStore, "file:///path or s3://bucket/prefix?endpoint=...&region=... (default: file://<data-dir>/objects when it exists)")
	fs.StringVar(&g.dataDir, "data-dir", g.dataDir, "a broker's data directory, for its local segments (read only)")
	fs.StringVar(&g.prefix, "prefix", g.prefix, "etcd key prefix of the cluster")
	fs.BoolVar(&g.json, "json", g.json, "machine-readable output")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "bound on connecting to etcd")
}

// env is what a command runs with.
type env struct {
	stdout, stderr io.Writer
	g              globals
	meta           *meta.Store
	store          objstore.Store
	logs           map[string]*localLog // opened local logs by directory
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr, g: globals{prefix: meta.DefaultPrefix, timeout: 10 * time.Second}}
	defer e.close()
	err := e.dispatch(ctx, args)
	var ue *usageError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errProblems):
		return 1
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "tierctl:", err)
		fmt.Fprintln(stderr, "run 'tierctl help' for usage")
		return 2
	default:
		fmt.Fprintln(stderr, "tierctl:", err)
		return 2
	}
}

// dispatch parses the global flags before the command name, then the
// command's flags (globals included) anywhere among its arguments.
func (e *env) dispatch(ctx context.Context, args []string) error {
	top := flag.NewFlagSet("tierctl", flag.ContinueOnError)
	top.SetOutput(e.stderr)
	e.g.register(top)
	showVersion := top.Bool("version", false, "print the version and exit")
	top.Usage = func() { e.usage(top.Output(), top) }
	if err := cli.Parse(top, args, e.stdout, e.stderr); err != nil {
		return err
	}
	if *showVersion {
		fmt.Fprintln(e.stdout, version.String("tierctl"))
		return nil
	}
	args = top.Args()
	if len(args) == 0 {
		e.usage(e.stderr, top)
		return usagef("no command")
	}
	if args[0] == "help" {
		if len(args) > 1 {
			return e.dispatch(ctx, []string{args[1], "--help"})
		}
		e.usage(e.stdout, top)
		return nil
	}
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == args[0] })
	if i < 0 {
		return usagef("unknown command %q", args[0])
	}
	c := commands[i]
	fs := flag.NewFlagSet("tierctl "+c.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	e.g.register(fs)
	runCmd := c.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: tierctl %s [flags] %s\n\n%s.\n\nflags:\n", c.name, c.args, c.summary)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args[1:], e.stdout, e.stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%s: %v", c.name, err)
	}
	return runCmd(ctx, e, pos)
}

// usage writes the command list and global flags to w: stdout when asked
// for, stderr with a mistake.
func (e *env) usage(w io.Writer, top *flag.FlagSet) {
	fmt.Fprintln(w, "usage: tierctl [global flags] command [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %-22s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(w, "\nglobal flags (also accepted after the command):")
	out := top.Output()
	top.SetOutput(w)
	top.PrintDefaults()
	top.SetOutput(out)
	fmt.Fprintln(w, "\n'tierctl COMMAND --help' (or 'tierctl help COMMAND') lists a command's flags.")
	fmt.Fprintln(w, "exit status: 0 ok, 1 problems found (verify, diff), 2 usage or connection errors")
}

// parseInterspersed parses flags anywhere among args and returns the
// positional arguments in order ("--" ends the flags).
func parseInterspersed(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) ([]string, error) {
	var pos []string
	for {
		if err := cli.Parse(fs, args, stdout, stderr); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// connect opens etcd and, if needStore, the object store.
func (e *env) connect(ctx context.Context, needStore bool) error {
	if e.g.endpoints == "" {
		return usagef("--etcd-endpoints is required")
	}
	var eps []string
	for ep := range strings.SplitSeq(e.g.endpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	log := zerolog.New(zerolog.ConsoleWriter{Out: e.stderr, NoColor: true}).Level(zerolog.ErrorLevel)
	st, err := meta.Open(ctx, meta.Config{Endpoints: eps, Prefix: e.g.prefix, StartTimeout: e.g.timeout}, log)
	if err != nil {
		return fmt.Errorf("connect to etcd %s: %w", e.g.endpoints, err)
	}
	e.meta = st
	if !needStore {
		return nil
	}
	url := e.g.objectStore
	if url == "" && e.g.dataDir != "" {
		dir, err := filepath.Abs(filepath.Join(e.g.dataDir, "objects"))
		if err != nil {
			return err
		}
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			url = "file://" + filepath.ToSlash(dir)
		}
	}
	if url == "" {
		return usagef("--object-store is required (or --data-dir of a broker whose objects are in <data-dir>/objects)")
	}
	s, err := open.URL(ctx, url, objstore.Options{})
	if err != nil {
		return fmt.Errorf("open the object store: %w", err)
	}
	// One listing first: a store that cannot be reached, a missing bucket
	// or credentials that may not read it stop the command here (exit
	// status 2) instead of surfacing as a problem per partition (status 1),
	// which would read as damage to the data.
	if err := tier.CheckListable(ctx, s); err != nil {
		return fmt.Errorf("object store %s: %w", redactURL(url), err)
	}
	e.store = s
	return nil
}

// redactURL hides a password in a store URL for messages.
func redactURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Redacted()
}

func (e *env) close() {
	for _, l := range e.logs {
		l.close()
	}
	if e.meta != nil {
		_ = e.meta.Close()
	}
}

// local returns the partition's local log from --data-dir, nil when there
// is no --data-dir or no log of that partition in it.
func (e *env) local(t target) (*localLog, error) {
	if e.g.dataDir == "" {
		return nil, nil
	}
	dir := walDir(e.g.dataDir, t.topic.ID, t.n)
	if l, ok := e.logs[dir]; ok {
		return l, nil
	}
	l, err := openLocal(dir)
	if err != nil || l == nil {
		return nil, err
	}
	if e.logs == nil {
		e.logs = make(map[string]*localLog)
	}
	e.logs[dir] = l
	return l, nil
}

// nowFlag parses an optional RFC 3339 time (the wall clock when empty).
func nowFlag(s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usagef("--now %q: want RFC 3339, e.g. 2026-01-02T15:04:05Z", s)
	}
	return t, nil
}

// offsetFlag is an int64 flag that remembers whether it was given.
type offsetFlag struct {
	v   wal.Offset
	set bool
}

func (f *offsetFlag) String() string { return fmt.Sprint(int64(f.v)) }
func (f *offsetFlag) Set(s string) error {
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || n < 0 {
		return fmt.Errorf("want an offset >= 0, got %q", s)
	}
	f.v, f.set = wal.Offset(n), true
	return nil
}
