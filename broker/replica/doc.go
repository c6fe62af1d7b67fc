// Package replica is the replication and election core of a partition: a
// pure state machine per replica (Replica) and one for the controller's
// election logic (Controller), in the shape of etcd's raft RawNode: inputs
// are method calls (a network message, a tick, a storage completion),
// outputs are collected in a Ready that the driver carries out before
// calling Advance. Neither starts a goroutine, reads a clock or does I/O,
// so the broker's partition owner goroutine and the deterministic simulator
// in this package's tests drive them the same way (SIMULATION.md).
//
// # Protocol (DESIGN.md §4)
//
// The partition state {Epoch, Leader, Replicas, Version} lives in etcd and
// only the controller writes it, with a compare-and-swap on Version. To
// elect, the controller fences epoch E' (above every epoch it knows) at the
// replicas; a replica persists Fenced=E' (HardState) and only then answers
// FenceAck{E', last epoch, durable end}. With a quorum of answers the
// controller picks a winner whose (last epoch, end) is >= that of quorum-1
// other answers (Raft's vote), preferring Replicas[0], and CASes {E',
// winner}. Replicas learn the state from etcd (SetState).
//
// The leader appends an epoch-start control batch, then serves followers'
// fetches (Kafka's replica Fetch with KIP-595 divergence: a follower whose
// last fetched epoch ends earlier in the leader's log is told
// DivergingEpoch and truncates). A follower fetches again only once all it
// appended is durable, so its fetch offset reports its durable end. The
// high watermark is the largest offset durable on MinISR (default: a
// majority) replicas, the leader included, and moves only once that covers
// the epoch-start batch (Raft's Figure 8).
//
//	controller                  replica A (leader E)   replica B (follower)
//	   │ Fence{E'} ─────────────────────▶│ persist Fenced=E', stop leading
//	   │◀──────────── FenceAck{E',LE,end}│
//	   │ Fence{E'} ────────────────────────────────────────▶│ persist
//	   │◀──────────────────────────────────────── FenceAck ──│
//	   │ CAS {E', winner} → etcd → SetState on every replica
//
// # API
//
//	New(cfg Config, hs HardState, epochs []EpochEntry, end, hw wal.Offset) *Replica
//	(*Replica) SetState(State)
//	(*Replica) Step(Message)
//	(*Replica) Tick()
//	(*Replica) Propose(count int, data []byte) (wal.Offset, error)
//	(*Replica) Wait(end wal.Offset, t Token, acksAll bool)
//	(*Replica) Durable(end wal.Offset)
//	(*Replica) HardStateDurable(HardState)
//	(*Replica) Fail(error)
//	(*Replica) HasReady() bool; Ready() Ready; Advance()
//	(*Replica) Status() Status
//	(*Replica) EndOffsetForEpoch(wal.Epoch) (wal.Epoch, wal.Offset)
//
//	NewController(ControllerConfig) *Controller
//	(*Controller) SetState(State); SetLive([]NodeID)
//	(*Controller) Step(Message)            // FenceAck, LeaderUnreachable
//	(*Controller) CASResult(ok bool, current State)
//	(*Controller) Tick()
//	(*Controller) HasReady() bool; Ready() ControllerReady; Advance()
//
// A driver's loop: feed inputs; while HasReady, take Ready, truncate the
// log to Ready.Truncate, persist Ready.HardState (and later call
// HardStateDurable), append Ready.Appends (and call Durable as fsyncs
// finish), fill each FetchResp's Batches from the log [ReadFrom, ReadTo)
// and send Messages, publish HW, answer Released and Failed tokens, then
// Advance.
//
// # Restarts
//
// New takes the recovered log and the durable HardState. A replica never
// leads an epoch <= the Fenced it recovered with (it may have served
// records to followers that it then lost); named leader of such an epoch it
// resigns by sending LeaderUnreachable for its own epoch, and the
// controller elects again. The controller keeps nothing durable: a fence
// answer refusing an old epoch tells it the highest fenced epoch.
//
// # Concurrency
//
// Replica and Controller are not safe for concurrent use; their owner
// serialises every call.
package replica
