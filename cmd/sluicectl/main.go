// Command sluicectl manages a shared Sluice cluster's tenants, users, API
// keys and ACLs over the broker's HTTP admin API (broker/httpapi/secapi).
//
//	sluicectl [global flags] tenant create|ls|rm [NAME]
//	sluicectl [global flags] user create|ls|rm|passwd ...
//	sluicectl [global flags] apikey create|ls|rm ...
//	sluicectl [global flags] acl add|ls|rm [filters]
//
// Global flags may also follow the command. It authenticates with --user
// and --password-file (HTTP Basic) or --api-key (Bearer; SLUICE_API_KEY),
// and verifies a TLS server with --cacert. Output is a table, or the JSON
// of the API with --json.
//
// Exit status: 0 ok (and --help, --version); 1 the server refused or
// failed the operation, or could not be reached (its message is printed);
// 2 a mistake on the command line (one line and a hint).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx, os.Args[1:], streams{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
	stop()
	os.Exit(exitCode(err, os.Stderr))
}
