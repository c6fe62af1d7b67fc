package tier

import "errors"

var (
	// ErrCorrupt: an object or manifest failed its checks. A read that meets
	// it is a retriable error for the client, never missing data.
	ErrCorrupt = errors.New("tier: corrupt object")
	// ErrOffsetOutOfRange: the offset is below the log start or not tiered.
	ErrOffsetOutOfRange = errors.New("tier: offset out of range")
	// ErrNotLeader: the head may be written only by the partition's leader.
	ErrNotLeader = errors.New("tier: not the leader")
	// ErrUnavailable: object storage could not be read; retriable.
	ErrUnavailable = errors.New("tier: object storage unavailable")
)
