package tier

// usage.go owns the remote bytes a partition retains as the retention
// machine knows them (its cached head), for the storage quota.

import "context"

// RemoteBytesBelow is the bytes of the partition's tiered range
// [LogStart, min(RemoteEnd, below)): what it retains in object storage and
// not at offsets the caller counts elsewhere (its local log from below on).
// Objects named by the head count by their size, a straddling one in full;
// the older objects, listed only in manifests in the bucket, are estimated
// at the head objects' bytes per offset (0 when the head has none), so the
// figure costs no object-store reads.
func (m *Manager) RemoteBytesBelow(ctx context.Context, topicID [16]byte, n int32, below int64) (int64, error) {
	h, err := m.cachedHead(ctx, topicID, n)
	if err != nil {
		return 0, err
	}
	end := min(h.RemoteEnd, below)
	if end <= h.LogStart {
		return 0, nil
	}
	var bytes, offsets, headFrom int64
	headFrom = end
	for _, o := range h.Objects {
		if o.Next <= h.LogStart || o.Base >= end {
			continue
		}
		bytes += o.Size
		offsets += o.Next - o.Base
		headFrom = min(headFrom, max(o.Base, h.LogStart))
	}
	if older := headFrom - h.LogStart; older > 0 && offsets > 0 {
		bytes += older * bytes / offsets
	}
	return bytes, nil
}
