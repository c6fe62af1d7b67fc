package runner

// faults_clock.go owns clock jumps. Each broker runs with
// --clock-offset-file pointing at a file of the runner's
// (clockFile), so a jump moves one broker's clock of retention, tiering,
// producer expiry and group sessions without touching the machine's clock,
// which the other brokers, etcd and the S3 server share. Jumps stay well
// inside the chaos topic's retention (a day), so a jump alone must delete
// nothing still retained and lose nothing acknowledged.
//
// Invariant: every clock file holds "0s" again before the fault is recorded
// as stopped (and after healAll).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// clockFile is broker id's --clock-offset-file under the run's directory.
func clockFile(dir string, id int32) string {
	return filepath.Join(dir, "clock-"+strconv.Itoa(int(id)))
}

// setClock writes broker id's clock offset; the broker reads it within
// 100 ms.
func (e *faultEnv) setClock(id int32, d time.Duration) error {
	if e.dir == "" {
		return fmt.Errorf("clock jumps need the brokers started with --clock-offset-file")
	}
	path := clockFile(e.dir, id)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// clockJump moves one broker's clock forward or back by 1 min to 2 h for
// 6 s, then back to the true time (a second jump, the other way).
func (e *faultEnv) clockJump(ctx context.Context) error {
	up := e.c.Up()
	if len(up) == 0 {
		return nil
	}
	id := up[e.rng.IntN(len(up))]
	d := time.Minute + time.Duration(e.rng.Int64N(int64(2*time.Hour-time.Minute)))
	if e.rng.IntN(2) == 1 {
		d = -d
	}
	d = d.Round(time.Second)
	f := e.start("clock-jump", brokerName(id), map[string]string{"offset": d.String()})
	if err := e.setClock(id, d); err != nil {
		return err
	}
	sleep(ctx, 6*time.Second)
	if err := e.setClock(id, 0); err != nil {
		return err
	}
	e.stop(f)
	return nil
}
