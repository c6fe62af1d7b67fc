package runner

// faults_disk.go owns the disk faults: a disk lost (diskLoss, below), and a
// broker's data directory (a small tmpfs of its own,
// cluster.Config.DataDirBytes) filled to the last bytes for 6 s, then
// freed. Produce is refused at the broker's free-space floor;
// appends of replicated batches, checkpoints and fsyncs fail with ENOSPC.
// The broker must never acknowledge a write it did not persist.
//
// A log whose write or fsync failed stays failed until its broker restarts
// (docs/durability.md: its durable copy is then in the broker's journal,
// which only a restart replays), as a Kafka log directory does. So, like an
// operator following that runbook, the fault ends by freeing the space and
// restarting the broker (kill -9, so what it had not fsynced is lost too).
//
// Invariant: the filler is removed before the fault is recorded as stopped
// (and by healAll after the run).

import (
	"context"
	"fmt"
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
	if err := e.kill(id); err != nil {
		return err
	}
	if err := e.c.Restart(ctx, id); err != nil {
		return fmt.Errorf("restart %s after its disk was freed: %w", brokerName(id), err)
	}
	e.stop(f)
	return nil
}

// diskLoss replays the sequence in which a lost disk loses data if the
// replica on it still votes: broker c is killed (it misses what follows),
// then broker b is killed, its data dir wiped (a replaced disk) and b
// started again empty, then broker a, the only one holding every record
// acknowledged meanwhile, is killed before b can have caught up, and c is
// restarted. b and c are a quorum by count but hold neither the committed
// tail nor a valid vote: a replica that lost its disk must not count in an
// election or a write quorum until it has caught up, so the partitions wait
// offline until a returns 3–5 s later, and nothing acknowledged is lost.
func (e *faultEnv) diskLoss(ctx context.Context) error {
	up := e.c.Up()
	if len(up) < 3 {
		return nil
	}
	e.rng.Shuffle(len(up), func(i, j int) { up[i], up[j] = up[j], up[i] })
	a, b, c := up[0], up[1], up[2]
	f := e.start("disk-loss", brokerName(b), map[string]string{"first_down": brokerName(c), "last_copy": brokerName(a)})
	if err := e.kill(c); err != nil {
		return err
	}
	sleep(ctx, time.Second+time.Duration(e.rng.Int64N(int64(time.Second))))
	if err := e.kill(b); err != nil {
		return err
	}
	delete(e.killed, b) // its canary's mark is wiped with its data: nothing to report
	if err := e.c.WipeDataDir(b); err != nil {
		return err
	}
	if err := e.c.Restart(ctx, b); err != nil {
		return fmt.Errorf("restart %s on an empty disk: %w", brokerName(b), err)
	}
	if err := e.kill(a); err != nil {
		return err
	}
	if err := e.c.Restart(ctx, c); err != nil {
		return fmt.Errorf("restart %s: %w", brokerName(c), err)
	}
	sleep(ctx, 3*time.Second+time.Duration(e.rng.Int64N(int64(2*time.Second))))
	if err := e.c.Restart(ctx, a); err != nil {
		return fmt.Errorf("restart %s: %w", brokerName(a), err)
	}
	e.stop(f)
	return nil
}
