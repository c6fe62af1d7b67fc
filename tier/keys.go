package tier

// keys.go owns the names of what tier/ writes to the bucket (tier/doc.go
// draws them): objects and manifests.
//
// Invariant: every key is fresh: it carries a new random UUID, so no upload,
// retried or from a deposed leader, ever replaces an object another head or
// manifest names; a losing upload can only be an orphan.

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-mq/sluice/wal"
)

// partitionPrefix is "<hash>/<topicID>/<partition>/": a short hash first so
// that partitions spread over the store's key space.
func partitionPrefix(topicID [16]byte, partition int32) string {
	h := fnv.New32a()
	h.Write(topicID[:])
	fmt.Fprintf(h, "/%d", partition)
	return fmt.Sprintf("%04x/%s/%d/", h.Sum32()&0xffff, uuid.UUID(topicID), partition)
}

// objectKey names a new object of offsets from base, uploaded at epoch.
func objectKey(topicID [16]byte, partition int32, base wal.Offset, epoch wal.Epoch) string {
	return fmt.Sprintf("%s%020d-%d-%s.obj", partitionPrefix(topicID, partition), base, epoch, uuid.New())
}

// manifestKey names a new manifest of objects from base.
func manifestKey(topicID [16]byte, partition int32, base wal.Offset) string {
	return fmt.Sprintf("%smanifest-%020d-%s.json", partitionPrefix(topicID, partition), base, uuid.New())
}

// KeyInfo is what a key tells about itself.
type KeyInfo struct {
	TopicID   [16]byte
	Partition int32
	Manifest  bool
	Base      wal.Offset
	Epoch     wal.Epoch // objects only
}

// ParseKey reads a key this package wrote; ok is false for any other.
func ParseKey(key string) (KeyInfo, bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 {
		return KeyInfo{}, false
	}
	id, err := uuid.Parse(parts[1])
	if err != nil {
		return KeyInfo{}, false
	}
	p, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil || p < 0 {
		return KeyInfo{}, false
	}
	info := KeyInfo{TopicID: id, Partition: int32(p)}
	if partitionPrefix(info.TopicID, info.Partition) != strings.Join(parts[:3], "/")+"/" {
		return KeyInfo{}, false
	}
	name := parts[3]
	if rest, ok := strings.CutPrefix(name, "manifest-"); ok {
		info.Manifest = true
		base, _, ok := strings.Cut(rest, "-")
		n, err := strconv.ParseInt(base, 10, 64)
		if !ok || err != nil || !strings.HasSuffix(name, ".json") {
			return KeyInfo{}, false
		}
		info.Base = wal.Offset(n)
		return info, true
	}
	fields := strings.SplitN(strings.TrimSuffix(name, ".obj"), "-", 3)
	if len(fields) != 3 || !strings.HasSuffix(name, ".obj") {
		return KeyInfo{}, false
	}
	base, err1 := strconv.ParseInt(fields[0], 10, 64)
	epoch, err2 := strconv.ParseInt(fields[1], 10, 32)
	if err1 != nil || err2 != nil {
		return KeyInfo{}, false
	}
	info.Base, info.Epoch = wal.Offset(base), wal.Epoch(epoch)
	return info, true
}
