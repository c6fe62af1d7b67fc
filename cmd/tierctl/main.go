// Command tierctl inspects a Sluice cluster's tiered storage: local segments,
// remote objects and the remote index heads in etcd; verifies them, dumps
// and exports records, compares the bucket with etcd (and removes orphans),
// and shows what the retention state machine would delete. See
// docs/tierctl.md.
//
// Exit status: 0 ok, 1 problems found (verify, diff), 2 usage or
// connection errors.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
