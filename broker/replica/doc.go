// Package replica is the replication and election core of a partition: a
// pure state machine per replica (Replica) and one for the controller's
// election logic (Controller), in the shape of etcd's raft RawNode: inputs
// are method calls (a network message, a tick, a storage completion),
// outputs are collected in a Ready that the driver carries out before
// calling Advance. Neither starts a goroutine, reads a clock or does I/O,
// so the broker's partition owner goroutine and the deterministic simulator
// in this package's tests drive them the same way.
//
// # Protocol
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
// high watermark is the largest offset durable on a majority of the
// replicas, the leader included (what every election keeps), and moves only
// once that covers the epoch-start batch (Raft's Figure 8). An acks=all
// reply waits, under the same epoch rule, for MinISR durable copies when
// MinISR is above a majority.
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
//	type NodeID int32                 // NoLeader = -1, ControllerNode = -2
//	type State struct { Epoch wal.Epoch; Leader NodeID; Replicas []NodeID; Version int64 }
//	type HardState struct { Fenced wal.Epoch }
//	type EpochEntry struct { Epoch wal.Epoch; Start wal.Offset }
//	type Batch struct { Base, Last wal.Offset; Epoch wal.Epoch; Control bool; Data []byte }
//	type Token uint64
//	type Config struct { ID NodeID; MinISR, LagTicks, FetchWaitTicks, RetryTicks, UnreachableTicks int }
//
//	func New(cfg Config, hs HardState, epochs []EpochEntry, end, hw wal.Offset) *Replica
//	func (r *Replica) SetState(s State)
//	func (r *Replica) Step(m Message)
//	func (r *Replica) Tick()
//	func (r *Replica) Propose(count int, data []byte) (wal.Offset, error)
//	func (r *Replica) Wait(end wal.Offset, t Token, acksAll bool)
//	func (r *Replica) Durable(end wal.Offset)
//	func (r *Replica) Truncated(end wal.Offset)
//	func (r *Replica) HardStateDurable(hs HardState)
//	func (r *Replica) Fail(err error)
//	func (r *Replica) HasReady() bool
//	func (r *Replica) Ready() Ready
//	func (r *Replica) Advance()
//	func (r *Replica) Status() Status
//	func (r *Replica) Followers() (end wal.Offset, fs []Follower)
//	func (r *Replica) EndOffsetForEpoch(e wal.Epoch) (wal.Epoch, wal.Offset)
//	func (r *Replica) SetLogStart(start, fetchStart wal.Offset)
//	func (r *Replica) LogStart() wal.Offset
//	func (r *Replica) LowWatermark() wal.Offset
//	func (r *Replica) WaitLowWatermark(off wal.Offset, t Token)
//
//	// wire.go: the brokers' encoding, crossed by the simulator too
//	func EncodeFetch(m Message, rp *kmsg.FetchRequestTopicPartition)
//	func DecodeFetch(from, to NodeID, seq uint64, rp *kmsg.FetchRequestTopicPartition) Message
//	func EncodeFetchAnswer(a *Message, sp *kmsg.FetchResponseTopicPartition) (include, read bool)
//	func DecodeFetchAnswer(fetch Message, sp *kmsg.FetchResponseTopicPartition) Message
//	func UnjudgedAnswer(fetch Message) Message  // the partition was left out
//	func FailedAnswer(fetch Message) Message    // the request failed
//	func EncodeEnvelopes([]Envelope) ([]byte, error); func DecodeEnvelopes(io.Reader) ([]Envelope, error)
//
//	func NewController(cfg ControllerConfig) *Controller
//	func (c *Controller) SetState(s State)
//	func (c *Controller) SetLive(ids []NodeID)
//	func (c *Controller) Step(m Message)   // FenceAck, LeaderUnreachable, CaughtUp
//	func (c *Controller) CASResult(ok bool, current State)
//	func (c *Controller) Tick()
//	func (c *Controller) HasReady() bool
//	func (c *Controller) Ready() ControllerReady // Messages (fences), CAS *CAS{Expect, New}
//	func (c *Controller) Advance()
//	func (c *Controller) Status() (State, bool, wal.Epoch)
//	func (c *Controller) Blocked() []NodeID // lost replicas keeping it from electing
//	func (c *Controller) ForceUnclean()     // an operator's unclean election
//	func (c *Controller) SetDraining(ids []NodeID) // brokers to move leadership off
//	func (c *Controller) PreferNow()        // an operator's preferred election
//
// A driver's loop: feed inputs; while HasReady, take Ready and do it in
// order: remove the log from Ready.Truncate on (whole batches; then call
// Truncated with the new end), persist Ready.HardState (HardStateDurable
// when done), append Ready.Appends (Durable as fsyncs finish), fill each
// FetchResp's Batches from the log [ReadFrom, ReadTo) up to a byte budget
// and send Messages (To ControllerNode goes to the controller), publish HW,
// answer Released and Failed tokens; then Advance. Propose and Wait are
// the produce path: Propose assigns offsets and appends, Wait parks the
// reply (also an idempotent retry's wait for its original batch).
//
// Messages are one struct, Message, with a Type: Fetch, FetchResp, Fence,
// FenceAck, LeaderUnreachable, and State (the etcd watch delivered as a
// message, as the simulator does). Error codes (ErrCodeNotLeader,
// ErrCodeFencedLeaderEpoch, ErrCodeUnknownLeaderEpoch) map to the Kafka
// codes of the same names at the broker edge; Propose and parked replies
// fail with ErrNotLeader, ErrNotEnoughReplicas or the storage error.
//
// # Liveness
//
// A follower that gets no good answer from its leader for UnreachableTicks
// sends LeaderUnreachable; so does a replica left without a role that long
// (fenced by a round that elected nobody, or named leader of an epoch it
// cannot lead: then at once). The controller elects when more than
// n-quorum followers complain, when the leader complains about itself,
// when the leader's lease is gone, when a replica reports a fence above the
// state's epoch, or when its own round was abandoned. It moves leadership
// back to Replicas[0] when that replica is live and quiet, after
// PreferredTicks under one leader, doubling the wait after a try that did
// not elect it. The leader accepts writes only while MinISR replicas
// (itself included) fetched within LagTicks.
//
// # Simulation
//
// sim_test.go drives three Replicas, a Controller and an etcd register
// from one seeded thread, with the faults drawn per seed;
// sim_check_test.go checks every step. Every message crosses the brokers'
// encoding (sim_wire_test.go through wire.go), and a leader may answer a
// fetch before its core judged it, as a broker answering a fetch of many
// partitions does. A consumer reads every replica below its own high
// watermark (sim_reads_test.go); a record it saw must stay the committed
// one at its offset. Leaders' log starts move (retention) and a follower
// may stay away until its leader's log start passes its end; it then
// restarts there (sim_retention_test.go). `go test ./broker/replica/` runs
// 1,000 seeds; `make sim` runs 100,000; a failure prints the seed and the
// command rerunning it with a trace.
//
// # Lost disks
//
// Config.Incarnation names the data directory's life and is stamped on
// every message. State.Incarnations records, per replica, the incarnation
// it was last in sync with. A replica answering with another one lost its
// disk: its fence answers do not vote and its fetches do not move the
// leader's HW, until it has caught up (its log matches the leader's through
// the leader's epoch start and last HW) and the controller records it
// (MsgCaughtUp, or the proof in a FenceAck's SyncedEpoch). Without an
// eligible quorum the controller elects nobody (Blocked) unless ForceUnclean.
// The simulator loses disks (sim_diskloss_test.go).
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
