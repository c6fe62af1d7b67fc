// Package cli holds the command-line conventions every Sluice binary
// follows: `--help`, `-h` and `help` (and a subcommand's `--help` and
// `help SUBCOMMAND`) print usage on stdout and exit 0; a mistake (an
// unknown flag or command) goes to stderr and exits 2.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
)

// Parse parses args with fs. What the flag package writes (fs.Usage, which
// must write to fs.Output(), and its message about a mistake) goes to
// stdout for -h or --help and to stderr otherwise; fs writes to stderr
// afterwards. It returns fs.Parse's error (flag.ErrHelp for help).
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = stdout.Write(buf.Bytes())
	} else {
		_, _ = stderr.Write(buf.Bytes())
	}
	return err
}

// IsHelp reports whether arg asks for help: help, -h, -help or --help.
func IsHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}
