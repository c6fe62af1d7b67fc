package node

// diskguard.go owns the local disk watermarks: when uploads to object
// storage fail for long enough that local logs keep growing, produce is
// refused with a retriable error (KAFKA_STORAGE_ERROR, HTTP 503) before the
// disk is full, and accepted again once uploads and retention have made
// room. Nothing is deleted to make room: data not yet uploaded stays.
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
	"syscall"
	"time"
)

// diskGuardInterval is how often the watermarks are measured: a sum over
// the partitions' sizes and one statfs, cheap enough to bound the overshoot
// to what arrives in this time.
const diskGuardInterval = 50 * time.Millisecond

// diskGuardLoop refreshes the guard until ctx ends.
func (b *Node) DiskGuardLoop(ctx context.Context) {
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

// refreshDiskGuard measures the local logs and the data dir's free space
// against the watermarks and records whether produce is refused, and why.
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
	if min := b.Cfg.DiskMinFreeBytes; why == "" && min > 0 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(b.Cfg.DataDir, &st); err == nil {
			if free := int64(st.Bavail) * int64(st.Bsize); free < min {
				why = fmt.Sprintf("the data dir's file system has %d bytes free, the floor is %d", free, min)
			}
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
