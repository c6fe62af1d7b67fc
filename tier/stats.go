package tier

// stats.go owns the manager's counters, read by the broker's metrics.

import "sync/atomic"

type stats struct {
	objectsUploaded atomic.Int64
	bytesUploaded   atomic.Int64
	uploadErrors    atomic.Int64
	objectsDeleted  atomic.Int64
	remoteReadBytes atomic.Int64
	remoteReads     atomic.Int64
	readErrors      atomic.Int64
	localDeleted    atomic.Int64
	refsDropped     atomic.Int64
}

// Stats are the manager's counters since it started.
type Stats struct {
	ObjectsUploaded      int64 // objects PUT (committed or not)
	BytesUploaded        int64
	UploadErrors         int64
	ObjectsDeleted       int64 // by retention, clean-up, intents and topic deletion
	RemoteReadBytes      int64 // record bytes served from object storage
	RemoteReads          int64
	ReadErrors           int64
	LocalSegmentsDeleted int64
	LargeRefsDropped     int64 // reference ledger entries dropped below a log start
}

// Stats returns the counters.
func (m *Manager) Stats() Stats {
	return Stats{
		ObjectsUploaded:      m.stats.objectsUploaded.Load(),
		BytesUploaded:        m.stats.bytesUploaded.Load(),
		UploadErrors:         m.stats.uploadErrors.Load(),
		ObjectsDeleted:       m.stats.objectsDeleted.Load(),
		RemoteReadBytes:      m.stats.remoteReadBytes.Load(),
		RemoteReads:          m.stats.remoteReads.Load(),
		ReadErrors:           m.stats.readErrors.Load(),
		LocalSegmentsDeleted: m.stats.localDeleted.Load(),
		LargeRefsDropped:     m.stats.refsDropped.Load(),
	}
}
