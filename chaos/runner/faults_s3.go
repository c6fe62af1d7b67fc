package runner

// faults_s3.go owns the S3 protocol faults: through the cluster's
// chaos/s3fault proxy, object storage answers 500 InternalError and 503
// SlowDown, loses the response to a PUT that took effect, cuts GET bodies
// short and lags, for 6 s. Uploads must retry and never commit an object
// the index cannot name; remote reads must fail retriably, never return a
// short or shifted range.
//
// Invariant: the proxy is healed before the fault is recorded as stopped.

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-mq/sluice/chaos/s3fault"
)

// s3Errors applies one seeded mix of protocol faults for 6 s.
func (e *faultEnv) s3Errors(ctx context.Context) error {
	p := e.c.S3Faults()
	if p == nil {
		return errors.New("s3-errors needs the S3 fault proxy (cluster.Config.S3Faults)")
	}
	kinds := []string{"errors", "lost-responses", "truncated-reads", "slow"}
	kind := kinds[e.rng.IntN(len(kinds))]
	var f s3fault.Faults
	switch kind {
	case "errors":
		f = s3fault.AllOps(s3fault.OpFaults{InternalErrorRate: 0.3, SlowDownRate: 0.3})
	case "lost-responses":
		f = s3fault.AllOps(s3fault.OpFaults{LostResponseRate: 0.5})
	case "truncated-reads":
		f = s3fault.AllOps(s3fault.OpFaults{TruncateRate: 0.5})
	case "slow":
		f = s3fault.AllOps(s3fault.OpFaults{Delay: 800 * time.Millisecond, Jitter: 700 * time.Millisecond})
	}
	rec := e.start("s3-"+kind, "brokers->s3", nil)
	if err := p.SetFaults(f); err != nil {
		return err
	}
	sleep(ctx, 6*time.Second)
	p.Heal()
	e.stop(rec)
	return nil
}
