package main

// cli.go owns the command line: the command table, the global flags every
// command accepts (before or after its name), help, and the exit status.
// A run belongs to one goroutine.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/cmd/internal/cli"
	"github.com/sluice-mq/sluice/cmd/internal/version"
)

// errUsage marks a mistake on the command line (exit status 2).
var errUsage = errors.New("usage")

// usageError is a command-line mistake, told in one line.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// exitCode reports err on stderr and turns it into the exit status.
func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, version.Usage("sluicectl", ue.msg))
		return 2
	default:
		fmt.Fprintln(stderr, "sluicectl:", err)
		return 1
	}
}

// streams are a run's outside world.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// command is one subcommand: a group ("user") and a verb ("create").
type command struct {
	group, verb string
	args        string // positional arguments, for the usage line
	summary     string
	// flags registers the command's own flags; the function it returns
	// runs the command with the positional arguments once all are parsed.
	flags func(fs *flag.FlagSet) func(ctx context.Context, e *env, args []string) error
}

var commands = []command{
	{"tenant", "create", "NAME", "create a tenant (super users)", tenantCreateFlags},
	{"tenant", "ls", "", "list tenants (super users)", tenantLsFlags},
	{"tenant", "rm", "NAME", "delete a tenant without users (super users)", tenantRmFlags},
	{"tenant", "set-pool", "NAME POOL", "bind a tenant's new partitions to a broker pool (super users)", tenantSetPoolFlags},
	{"user", "create", "NAME", "create a user; the password is read from stdin", userCreateFlags},
	{"user", "ls", "", "list the users of a tenant", userLsFlags},
	{"user", "rm", "NAME", "delete a user and its API keys", userRmFlags},
	{"user", "passwd", "NAME", "set a user's password, read from stdin", userPasswdFlags},
	{"apikey", "create", "", "create an API key for a user; the key is shown once", apikeyCreateFlags},
	{"apikey", "ls", "", "list a user's API keys (never the keys)", apikeyLsFlags},
	{"apikey", "rm", "ID", "delete an API key", apikeyRmFlags},
	{"acl", "add", "", "add an ACL binding", aclAddFlags},
	{"acl", "ls", "", "list the ACL bindings a filter selects", aclLsFlags},
	{"acl", "rm", "", "delete the ACL bindings a filter selects", aclRmFlags},
	{"certs", "create", "", "make a CA and certificates for brokers and clients (talks to no server)", certsCreateFlags},
	{"quota", "set", "KEY=VALUE…", "set or remove a tenant's quotas, weight or priority class (super users)", quotaSetFlags},
	{"quota", "ls", "", "list quotas: one tenant's, or every tenant's with any set", quotaLsFlags},
	{"quota", "keys", "", "list the quota keys with their kind, unit and meaning (talks to no server)", quotaKeysFlags},
	{"top", "", "", "the busiest partitions: ingress bytes/s, records/s and hot keys (top.go)", topFlags},
	{"broker", "ls", "", "the brokers: AZ, liveness, controller, drain mark and partitions led", brokerLsFlags},
	{"broker", "drain", "N", "move leaderships and groups off broker N before stopping it (super users)", brokerDrainFlags},
	{"broker", "undrain", "N", "let broker N lead and coordinate again (super users)", brokerUndrainFlags},
	{"partition", "reassign", "TOPIC PARTITION", "move a partition's replicas (--replicas 1,2,4), copying only the local tail (super users)", partitionReassignFlags},
	{"partition", "reassignments", "", "the pending reassignments and the step each is at (super users)", partitionReassignmentsFlags},
	{"partition", "cancel", "TOPIC PARTITION", "cancel a pending reassignment: back to the original replicas (super users)", partitionCancelFlags},
	{"leader", "elect", "", "--preferred: move leaderships back to the preferred replicas now (super users)", leaderElectFlags},
	{"dlq", "ls", "[DLQ…]", "list dead-letter topics with their depth and oldest dead letter (dlq.go)", dlqLsFlags},
	{"dlq", "show", "DLQ", "show dead letters of a DLQ partition with their history", dlqShowFlags},
	{"dlq", "redrive", "DLQ", "redrive dead letters to a topic; --wait follows the progress", dlqRedriveFlags},
	{"dlq", "redrives", "DLQ", "list a DLQ's redrives and their progress", dlqRedrivesFlags},
	{"dlq", "cancel", "ID", "cancel a redrive", dlqCancelFlags},
}

// globals are the flags every command takes.
type globals struct {
	server       string
	user         string
	passwordFile string
	apiKey       string
	cacert       string
	json         bool
}

// register adds the global flags to fs, except those a command defines
// itself: the apikey commands' --user names the key's user, so there the
// authenticating --user must come before the command.
func (g *globals) register(fs *flag.FlagSet) {
	str := func(p *string, name, usage string) {
		if fs.Lookup(name) == nil {
			fs.StringVar(p, name, *p, usage)
		}
	}
	str(&g.server, "server", "URL of a broker's HTTP API (env SLUICE_SERVER)")
	str(&g.user, "user", "user name for HTTP Basic authentication (with --password-file); before the command for apikey")
	str(&g.passwordFile, "password-file", "file holding --user's password (its first line)")
	str(&g.apiKey, "api-key", "API key, sent as a Bearer token (env SLUICE_API_KEY)")
	str(&g.cacert, "cacert", "PEM file of the CA certificates that verify an https server")
	fs.BoolVar(&g.json, "json", g.json, "print the API's JSON instead of a table")
}

// defaultServer is where `make run` serves the HTTP API.
const defaultServer = "http://127.0.0.1:8080"

// run parses args and runs one command.
func run(ctx context.Context, args []string, s streams) error {
	g := globals{server: s.getenv("SLUICE_SERVER"), apiKey: s.getenv("SLUICE_API_KEY")}
	if g.server == "" {
		g.server = defaultServer
	}
	top := flag.NewFlagSet("sluicectl", flag.ContinueOnError)
	g.register(top)
	showVersion := top.Bool("version", false, "print the version and exit")
	if err := parse(top, args, s.stderr, func() { usage(s.stdout, top) }); err != nil {
		return err
	}
	if *showVersion {
		fmt.Fprintln(s.stdout, version.String("sluicectl"))
		return nil
	}
	args = top.Args()
	if len(args) == 0 {
		return usagef("no command (%s)", groupList())
	}
	if args[0] == "help" {
		if len(args) == 1 {
			usage(s.stdout, top)
			return flag.ErrHelp
		}
		args = append(args[1:], "--help") // help COMMAND [SUBCOMMAND]
	}
	group := args[0]
	if !slices.ContainsFunc(commands, func(c command) bool { return c.group == group }) {
		return usagef("unknown command %q (%s)", group, groupList())
	}
	if slices.ContainsFunc(commands, func(c command) bool { return c.group == group && c.verb == "" }) {
		args = append([]string{group, ""}, args[1:]...) // a command without subcommands (top)
		if len(args) == 3 && args[2] == "help" {
			args[2] = "--help" // top help, as tenant help
		}
	}
	verbs := groupVerbs(group)
	if len(args) < 2 || cli.IsHelp(args[1]) {
		if len(args) >= 2 {
			groupUsage(s.stdout, group)
			return flag.ErrHelp
		}
		return usagef("%s needs a subcommand (%s)", group, verbs)
	}
	i := slices.IndexFunc(commands, func(c command) bool { return c.group == group && c.verb == args[1] })
	if i < 0 {
		return usagef("unknown subcommand %q of %s (%s)", args[1], group, verbs)
	}
	c := commands[i]
	fs := flag.NewFlagSet("sluicectl "+c.group+" "+c.verb, flag.ContinueOnError)
	runCmd := c.flags(fs)
	g.register(fs)
	pos, err := parseInterspersed(fs, args[2:], s.stderr, func() {
		fmt.Fprintf(s.stdout, "usage: sluicectl %s %s [flags] %s\n\n%s.\n\nflags:\n", c.group, c.verb, c.args, c.summary)
		fs.SetOutput(s.stdout)
		fs.PrintDefaults()
		fs.SetOutput(s.stderr)
	})
	if err != nil {
		if ue := (*usageError)(nil); errors.As(err, &ue) {
			return usagef("%s %s: %s", c.group, c.verb, ue.msg)
		}
		return err
	}
	e, err := newEnv(g, s)
	if err != nil {
		return err
	}
	err = runCmd(ctx, e, pos)
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		return usagef("%s %s: %s", c.group, c.verb, ue.msg)
	}
	return err
}

// groupList names every command of the table, in its order.
func groupList() string {
	var gs []string
	for _, c := range commands {
		if !slices.Contains(gs, c.group) {
			gs = append(gs, c.group)
		}
	}
	return strings.Join(gs[:len(gs)-1], ", ") + " or " + gs[len(gs)-1]
}

func groupVerbs(group string) string {
	var vs []string
	for _, c := range commands {
		if c.group == group {
			vs = append(vs, c.verb)
		}
	}
	return strings.Join(vs, ", ")
}

// parse parses fs quietly: a mistake becomes one usage line (the whole
// list would push it off the screen); --help prints the list.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer, help func()) error {
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		help()
		return err
	case err != nil:
		return usagef("%s", err.Error())
	}
	return nil
}

// parseInterspersed parses flags anywhere among args and returns the
// positional arguments in order ("--" ends the flags).
func parseInterspersed(fs *flag.FlagSet, args []string, stderr io.Writer, help func()) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args, stderr, help); err != nil {
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

// groupUsage lists one command's subcommands (sluicectl tenant --help).
func groupUsage(w io.Writer, group string) {
	fmt.Fprintf(w, "usage: sluicectl [global flags] %s subcommand [flags] [args]\n\nsubcommands:\n", group)
	for _, c := range commands {
		if c.group == group {
			fmt.Fprintf(w, "  %-6s %-7s %-5s %s\n", c.group, c.verb, c.args, c.summary)
		}
	}
	fmt.Fprintf(w, "\n'sluicectl %s SUBCOMMAND --help' lists a subcommand's flags; 'sluicectl --help' the global flags.\n", group)
}

// usage writes the command list and the global flags to w.
func usage(w io.Writer, top *flag.FlagSet) {
	fmt.Fprintln(w, "usage: sluicectl [global flags] command subcommand [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-6s %-7s %-5s %s\n", c.group, c.verb, c.args, c.summary)
	}
	fmt.Fprintln(w, "\nglobal flags (also accepted after the command):")
	out := top.Output()
	top.SetOutput(w)
	top.PrintDefaults()
	top.SetOutput(out)
	fmt.Fprintln(w, "\n'sluicectl COMMAND SUBCOMMAND --help' (or 'sluicectl help COMMAND SUBCOMMAND') lists a subcommand's flags.")
	fmt.Fprintln(w, "exit status: 0 ok, 1 the server refused or failed the operation, 2 a command-line mistake")
}

// positional checks the count of positional arguments.
func positional(args []string, names ...string) error {
	switch {
	case len(args) < len(names):
		return usagef("missing %s", strings.Join(names[len(args):], " "))
	case len(args) > len(names):
		return usagef("unexpected argument %q", args[len(names)])
	}
	return nil
}
