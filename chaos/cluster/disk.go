package cluster

// disk.go owns the brokers' small disks (Config.DataDirBytes): a tmpfs of
// that size mounted on each broker's data dir by Start before any process
// runs, filled up to a given free space (FillDisk) and freed again
// (FreeDisk) while the brokers run, and unmounted by Stop once they have
// exited. Cluster.mounts is written by Start alone and read by Stop.
//
// Invariant: every mount Start made is in Cluster.mounts before Start can
// fail after it, and Stop (which a failed Start calls) unmounts each, so no
// mount outlives the Cluster unless the calling process dies before Stop.
// Invariant: FillDisk and FreeDisk write only Dir/nN/data/chaos-filler, and
// only on a tmpfs this Cluster mounted, never on the host's file system.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNoMount is returned (wrapped, with the reason) by Start when
// Config.DataDirBytes is set and a tmpfs cannot be mounted: not Linux, or
// not allowed (mounting needs root or CAP_SYS_ADMIN). A test skips on it.
var ErrNoMount = errors.New("chaos/cluster: tmpfs could not be mounted")

const (
	fillerName = "chaos-filler" // the file FillDisk grows in a data dir
	fillChunk  = 1 << 20        // bytes per write of FillDisk
)

// dataDir is broker id's data dir, Dir/nN/data.
func dataDir(dir string, id int32) string {
	return filepath.Join(dir, fmt.Sprintf("n%d", id), "data")
}

// mountDataDirs makes every broker's data dir and mounts a tmpfs of
// Config.DataDirBytes on it, recording each mount in c.mounts as it is made.
func (c *Cluster) mountDataDirs() error {
	for id := int32(1); id <= Size; id++ {
		dir := dataDir(c.cfg.Dir, id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("chaos/cluster: make data dir: %w", err)
		}
		if err := mountTmpfs(dir, c.cfg.DataDirBytes); err != nil {
			return fmt.Errorf("%w on %s (size %d bytes): %w", ErrNoMount, dir, c.cfg.DataDirBytes, err)
		}
		c.mounts = append(c.mounts, dir)
		c.log.Info().Str("dir", dir).Int64("bytes", c.cfg.DataDirBytes).Msg("tmpfs mounted")
	}
	return nil
}

// unmountAll unmounts every tmpfs of c.mounts; one still busy is detached
// (MNT_DETACH: gone from the tree now, freed when its last user closes).
// Called by stop once every broker has exited.
func (c *Cluster) unmountAll() error {
	var errs []error
	for _, dir := range c.mounts {
		err := unmountTmpfs(dir)
		c.log.Info().Str("dir", dir).Err(err).Msg("tmpfs unmounted")
		if err != nil {
			errs = append(errs, fmt.Errorf("chaos/cluster: unmount %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// emptyDir makes dir if missing and removes everything in it, leaving the
// directory itself (it may be a mount point).
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// FillDisk grows the file chaos-filler in broker id's data dir until its
// file system has at most leave bytes free (and less than leave plus one
// block), so the broker meets a full disk while it runs. Calling it again
// tops the filler up; FreeDisk removes it. It needs Config.DataDirBytes:
// it never fills the host's file system. A broker writing at the same time
// may take the last bytes first; the disk is full then, and FillDisk
// returns nil.
func (c *Cluster) FillDisk(id int32, leave int64) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.life.RUnlock()
	b, err := c.broker(id)
	if err != nil {
		return err
	}
	switch {
	case len(c.mounts) == 0:
		return errors.New("chaos/cluster: FillDisk needs Config.DataDirBytes (it would fill the host's file system)")
	case leave < 0:
		return fmt.Errorf("chaos/cluster: FillDisk: negative free space %d", leave)
	}
	written, free, err := fill(filepath.Join(b.DataDir, fillerName), leave)
	c.log.Info().Int32("broker", id).Int64("leave", leave).Int64("written", written).Int64("free", free).Err(err).Msg("fill disk")
	if err != nil {
		return fmt.Errorf("chaos/cluster: fill the disk of broker %d: %w", id, err)
	}
	return nil
}

// fill appends whole blocks of zeros to path while its file system has
// more than leave bytes free, and returns how many it wrote and the free
// space it left.
func fill(path string, leave int64) (written, free int64, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	dir := filepath.Dir(path)
	buf := make([]byte, fillChunk)
	for {
		var block int64
		if free, block, err = freeBytes(dir); err != nil {
			return written, free, err
		}
		// Whole blocks only: a partial one would take a whole block and
		// leave less than asked.
		n := min(free-leave, fillChunk) / block * block
		if n <= 0 {
			return written, free, nil
		}
		m, werr := f.Write(buf[:n])
		written += int64(m)
		if errors.Is(werr, syscall.ENOSPC) {
			// Full: whatever else wrote meanwhile took the rest.
			free, _, err = freeBytes(dir)
			return written, free, err
		}
		if werr != nil {
			return written, free, werr
		}
	}
}

// FreeDisk removes the filler FillDisk wrote in broker id's data dir; nil
// if there is none.
func (c *Cluster) FreeDisk(id int32) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.life.RUnlock()
	b, err := c.broker(id)
	if err != nil {
		return err
	}
	err = os.Remove(filepath.Join(b.DataDir, fillerName))
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	c.log.Info().Int32("broker", id).Err(err).Msg("free disk")
	if err != nil {
		return fmt.Errorf("chaos/cluster: free the disk of broker %d: %w", id, err)
	}
	return nil
}
