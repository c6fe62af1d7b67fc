// Package version says which build of a Sluice binary is running, for the
// --version flag every command under cmd/ takes. Everything comes from the
// build information the Go toolchain embeds (runtime/debug.ReadBuildInfo):
// the main module's version, and the VCS revision and whether the work tree
// had uncommitted changes when the binary was built. Nothing is stamped in
// by the Makefile, so `go build`, `go install` and `make build` agree.
package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// String is the one line `NAME --version` prints, e.g.
//
//	sluiced v0.3.1 (commit 768fe18a0b1c, 2026-01-02T15:04:05Z) go1.26.8
//	sluiced (devel) (commit 768fe18a0b1c, 2026-01-02T15:04:05Z, modified) go1.26.8
func String(name string) string {
	bi, ok := debug.ReadBuildInfo()
	return format(name, bi, ok)
}

// format is String over given build information; ok is false when the
// binary carries none.
func format(name string, bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return name + " (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var vcs []string
	if rev != "" {
		vcs = append(vcs, "commit "+shortRevision(rev))
	}
	if when != "" {
		vcs = append(vcs, when)
	}
	if modified {
		vcs = append(vcs, "modified")
	}
	out := name + " " + v
	if len(vcs) > 0 {
		out += " (" + strings.Join(vcs, ", ") + ")"
	}
	if bi.GoVersion != "" {
		out += " " + bi.GoVersion
	}
	return out
}

// shortRevision keeps twelve hex digits of a commit hash: enough to name a
// commit of this repository, short enough to read.
func shortRevision(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// Usage is what a command prints for a usage mistake before it exits with
// status 2 (the flag package's convention for a bad command line).
func Usage(name, msg string) string {
	return fmt.Sprintf("%s: %s\nrun '%s --help' for usage", name, msg, name)
}
