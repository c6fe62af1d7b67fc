package runner

// faults_disk.go owns the disk faults: a broker's data directory (a small
// tmpfs of its own, cluster.Config.DataDirBytes) filled to the last bytes
// for 6 s, then freed. Appends, journal writes and fsyncs fail with ENOSPC
// on that broker; it must refuse or fail writes, never acknowledge one it
// did not persist, and carry on once space returns.
//
// Invariant: the filler is removed before the fault is recorded as stopped
// (and by healAll after the run).

import (
	"context"
	"strconv"
	"time"
)

// diskFull fills a random broker's data directory.
func (e *faultEnv) diskFull(ctx context.Context) error {
	up := e.c.Up()
	if len(up) == 0 {
		return nil
	}
	id := up[e.rng.IntN(len(up))]
	leave := int64(e.rng.IntN(3)) * 16 << 10 // 0, 16 or 32 KiB left
	f := e.start("disk-full", brokerName(id), map[string]string{"free_bytes": strconv.FormatInt(leave, 10)})
	e.filled = append(e.filled, id)
	if err := e.c.FillDisk(id, leave); err != nil {
		return err
	}
	sleep(ctx, 6*time.Second)
	if err := e.c.FreeDisk(id); err != nil {
		return err
	}
	e.filled = e.filled[:len(e.filled)-1]
	e.stop(f)
	return nil
}
