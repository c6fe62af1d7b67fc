package main

// certs.go owns `sluicectl certs create`: a certificate authority and the
// certificates a secure cluster needs (one per broker, serving clients and
// presented to the other brokers; one per named client), made with Go's
// crypto through broker/listener/certgen, so no openssl is needed. It talks
// to no server. A second run in the same directory reuses the CA and issues
// only what is missing, so brokers and clients can be added later.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/broker/listener/certgen"
)

// certValidity is how long the certificates made here last; they are for
// development and test clusters, which rotate by running the command again
// in a fresh directory.
const certValidity = 365 * 24 * time.Hour

func certsCreateFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	dir := fs.String("dir", "", "directory for ca.crt, ca.key and <name>.crt/.key (created if missing)")
	brokers := fs.String("brokers", "broker-1,broker-2,broker-3", "comma-separated broker names: each gets a certificate for serving and for dialling the other brokers")
	clients := fs.String("clients", "", "comma-separated client names: each gets a client certificate whose common name is its principal (User:<name>)")
	hosts := fs.String("hosts", "localhost,127.0.0.1", "comma-separated DNS names and IP addresses every broker certificate names")
	return func(_ context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		if *dir == "" {
			return usagef("--dir is required")
		}
		var dns []string
		var ips []net.IP
		for _, h := range splitList(*hosts) {
			if ip := net.ParseIP(h); ip != nil {
				ips = append(ips, ip)
			} else {
				dns = append(dns, h)
			}
		}
		if len(dns)+len(ips) == 0 {
			return usagef("--hosts names no host")
		}
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			return err
		}
		ca, err := certgen.LoadCA(*dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if ca, err = certgen.NewCA("Sluice development CA", certValidity+24*time.Hour); err != nil {
				return err
			}
			if err := ca.WriteFiles(*dir); err != nil {
				return err
			}
			e.note("created %s", filepath.Join(*dir, certgen.CACertFile))
		case err != nil:
			return fmt.Errorf("load the CA in %s: %w", *dir, err)
		}
		issue := func(name string, usage certgen.Usage) error {
			if _, err := os.Stat(filepath.Join(*dir, name+".crt")); err == nil {
				e.note("kept %s", filepath.Join(*dir, name+".crt"))
				return nil
			}
			var names []string
			var addrs []net.IP
			if usage != certgen.Client {
				names, addrs = dns, ips
			}
			cert, key, err := ca.Issue(name, names, addrs, usage, certValidity)
			if err != nil {
				return fmt.Errorf("issue %s: %w", name, err)
			}
			if err := certgen.WriteFiles(*dir, name, cert, key); err != nil {
				return err
			}
			e.note("created %s", filepath.Join(*dir, name+".crt"))
			return nil
		}
		for _, b := range splitList(*brokers) {
			if err := issue(b, certgen.Both); err != nil {
				return err
			}
		}
		for _, c := range splitList(*clients) {
			if err := issue(c, certgen.Client); err != nil {
				return err
			}
		}
		if e.json {
			return e.writeJSON(map[string]any{"dir": *dir, "brokers": splitList(*brokers), "clients": splitList(*clients)})
		}
		return nil
	}
}

// note prints one line of progress (to stderr with --json, so stdout stays
// one JSON document).
func (e *env) note(format string, args ...any) {
	w := e.stdout
	if e.json {
		w = e.stderr
	}
	fmt.Fprintf(w, format+"\n", args...)
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
