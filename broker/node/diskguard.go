package node

// diskguard.go owns the local disk watermarks: when uploads to object
// storage fail for long enough that local logs keep growing, produce is
// refused with a retriable error (KAFKA_STORAGE_ERROR, HTTP 503) before the
// disk is full, and accepted again once uploads and retention have made
// room. Nothing is deleted to make room: data not yet uploaded stays.
// The same loop feeds the disk ladder (diskladder.go), whose reserve is
// --disk-min-free-bytes, and runs the storage quota's (storage.go).
//
// Invariant: the guard only refuses appends; it never deletes and never
// blocks a read.
//
// The state is refreshed every diskGuardInterval by its own loop (not the
// maintenance tick, which is 30 s by default: a disk can fill in that time)
// and read by every produce through an atomic.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// diskGuardInterval is how often the watermarks are measured: a sum over
// the partitions' sizes and one statfs, cheap enough to bound the overshoot
// to what arrives in this time.
const diskGuardInterval = 50 * time.Millisecond

// diskGuardLoop refreshes the guard, the ladder and the storage figures
// until ctx ends.
func (b *Node) DiskGuardLoop(ctx context.Context) {
	_ = b.M.Reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_disk_watermark_level",
		Help: "The disk-watermark ladder's level: 0 none, 1 no new topics or partitions, 2 no bursts for low-priority tenants, 3 publishes over quota refused.",
	}, func() float64 { return float64(b.DiskLevel()) }))
	// The storage figures have a loop of their own: they read etcd, which
	// must never hold up the disk guard.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.storageLoop(ctx)
	}()
	defer wg.Wait()
	t := time.NewTicker(diskGuardInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.refreshDiskGuard()
		}
	}
}

// errDiskFull marks a produce refused at a disk watermark; retriable.
var errDiskFull = errors.New("local disk watermark reached: uploads to object storage are behind")

// diskUsage reads the data dir's file system: the injected reader, else statfs.
func (b *Node) diskUsage() (total, free int64, err error) {
	if b.Cfg.DiskUsage != nil {
		return b.Cfg.DiskUsage(b.Cfg.DataDir)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(b.Cfg.DataDir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", b.Cfg.DataDir, err)
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize), nil
}

// refreshDiskGuard measures the local logs and the data dir's free space
// against the watermarks and records whether produce is refused, and why;
// the same reading steps the ladder.
func (b *Node) refreshDiskGuard() {
	var why string
	if max := b.Cfg.LocalMaxBytes; max > 0 {
		var total int64
		for _, p := range b.AllPartitions() {
			total += p.Log().Size()
		}
		if total >= max {
			why = fmt.Sprintf("local logs hold %d bytes, the limit is %d", total, max)
		}
	}
	if min, ladder := b.Cfg.DiskMinFreeBytes, !b.Cfg.DiskWatermarks.Off(); min > 0 || ladder {
		total, free, err := b.diskUsage()
		if err == nil && why == "" && min > 0 && free < min {
			why = fmt.Sprintf("the data dir's file system has %d bytes free, the reserve is %d", free, min)
		}
		if err == nil && ladder && total > 0 {
			b.ladder.marks = b.Cfg.DiskWatermarks
			b.stepLadder(100 * float64(total-free) / float64(total))
		}
	}
	prev := b.diskFull.Swap(&why)
	switch {
	case why != "" && (prev == nil || *prev == ""):
		b.Logger.Warn().Str("why", why).Msg("produce refused: disk watermark reached")
	case why == "" && prev != nil && *prev != "":
		b.Logger.Info().Msg("produce accepted again: below the disk watermarks")
	}
}

// checkDisk returns errDiskFull while a watermark is reached.
func (b *Node) CheckDisk() error {
	if why := b.diskFull.Load(); why != nil && *why != "" {
		return fmt.Errorf("%w: %s", errDiskFull, *why)
	}
	return nil
}
