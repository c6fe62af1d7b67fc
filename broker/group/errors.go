package group

import "errors"

// Sentinel errors returned by the state machine. The broker maps each to one
// Kafka error code (broker/errcode.go).
var (
	// ErrUnknownMember: the member id is not (or no longer) in the group.
	ErrUnknownMember = errors.New("group: unknown member id")
	// ErrIllegalGeneration: the request carries a generation that is not the group's.
	ErrIllegalGeneration = errors.New("group: illegal generation")
	// ErrFencedInstance: another member id now holds this group.instance.id.
	ErrFencedInstance = errors.New("group: fenced instance id")
	// ErrRebalanceInProgress: the group is rebalancing; rejoin.
	ErrRebalanceInProgress = errors.New("group: rebalance in progress")
	// ErrInvalidSessionTimeout: the session timeout is outside the configured bounds.
	ErrInvalidSessionTimeout = errors.New("group: invalid session timeout")
	// ErrInconsistentProtocol: protocol type differs, or no protocol is shared with the group.
	ErrInconsistentProtocol = errors.New("group: inconsistent group protocol")
	// ErrMemberIDRequired: a new dynamic member must rejoin with the id it was given.
	ErrMemberIDRequired = errors.New("group: member id required")
	// ErrNotEmpty: the operation needs a group without members.
	ErrNotEmpty = errors.New("group: group is not empty")
	// ErrDead: the group was deleted; its id may be used again for a new group.
	ErrDead = errors.New("group: group is dead")
)
