package vfs

// Writebacker is implemented by files that can start writing a range of
// dirty pages to the device without waiting for it (Linux's
// sync_file_range with SYNC_FILE_RANGE_WRITE). It makes nothing durable;
// it spreads the device work of a later fsync over time, so that fsync
// finds little left to write.
type Writebacker interface {
	StartWriteback(off, n int64) error
}

// StartWriteback starts writeback of [off, off+n) of f if f supports it,
// and does nothing otherwise.
func StartWriteback(f File, off, n int64) error {
	if w, ok := f.(Writebacker); ok {
		return w.StartWriteback(off, n)
	}
	return nil
}

// DataSyncer is implemented by files that can make their contents durable
// without also flushing metadata that reads do not need (fdatasync): on a
// preallocated file overwritten in place, that is one device flush and no
// file-system journal commit.
type DataSyncer interface {
	DataSync() error
}

// DataSync makes f's contents durable, with fdatasync where f supports it
// and Sync otherwise.
func DataSync(f File) error {
	if d, ok := f.(DataSyncer); ok {
		return d.DataSync()
	}
	return f.Sync()
}

// CacheDropper is implemented by files whose cached pages can be dropped
// (Linux's posix_fadvise with POSIX_FADV_DONTNEED). Dropping clean pages
// loses nothing: a later read fetches them from the device again.
type CacheDropper interface {
	DropCache(off, n int64) error
}

// DropCache asks the kernel to drop [off, off+n) of f from the page cache
// if f supports it, and does nothing otherwise. Call it only on a durable
// range: the kernel may also start writing back dirty pages in it.
func DropCache(f File, off, n int64) error {
	if d, ok := f.(CacheDropper); ok {
		return d.DropCache(off, n)
	}
	return nil
}
