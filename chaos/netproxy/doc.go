// Package netproxy is the network of the chaos suite: a userspace TCP proxy
// that sits in front of one listener and injects faults into the links that
// pass through it, because the kernels the suite runs on have no netem. A
// Mesh puts one proxy on every (source, endpoint) pair of a cluster, so a
// fault can be aimed at one direction of one link: broker 1 → broker 2's
// replication endpoint, broker 2 → etcd member 3's peer port, clients →
// broker 3's Kafka listener.
//
// # Model
//
// Every accepted connection is paired with one dialed to the upstream (the
// upstream as of the accept; SetUpstream changes only later connections).
// Each direction is pumped by a reader, which reads chunks of at most
// chunkSize bytes, and a writer, which forwards them in order through a
// bounded queue (queueLen chunks: the link's bandwidth-delay product). An
// end of stream is passed on as a half close (CloseWrite), so a peer sees the
// same FIN it would see without the proxy; a reset or a failed write on either
// side resets both.
//
// # Faults
//
// Faults are set per direction (ToUpstream: client → upstream; ToClient:
// upstream → client) at any time, and apply at once to existing connections
// and to new ones:
//
//   - Delay(d, jitter): a chunk is written no earlier than d ± jitter (uniform)
//     after it was read, and never before the chunk read ahead of it, so order
//     holds; an end of stream follows the last chunk. Delay is latency, not
//     bandwidth: chunks in flight overlap. A chunk already held is released
//     against the delay in force now, so lowering the delay or healing
//     releases held data early.
//   - Drop(rate): each chunk read is lost with probability rate, and a loss
//     cuts the connection (both sides reset). TCP never delivers a stream with
//     a hole in it: it retransmits, and when loss persists the connection
//     times out. Cutting at the first loss is that outcome, reached at once;
//     delivering the stream minus a chunk would hand the application bytes no
//     real network can produce (a desynchronised Kafka frame), and finding
//     such an "anomaly" would be the proxy's bug, not the broker's. Latency
//     from retransmission is modelled by Delay with jitter.
//   - Blackhole: bytes are read and discarded, and an end of stream is
//     swallowed too, so the peer sees a hung connection, as in a partition
//     where packets vanish. Writers to a blackholed link never block: the
//     proxy keeps reading even when the far side has stopped reading. New
//     connections are still accepted and dialed. Because the bytes are gone,
//     a connection that lost any to a blackhole is cut when the blackhole
//     lifts (or at its next chunk), never resumed with a hole: as TCP gives
//     up on a connection whose segments stopped arriving, and the
//     application reconnects. Use Stall for a partition short enough that
//     TCP rides it out.
//   - Stall: bytes are held, not lost: the writer stops, the queue fills and
//     the proxy stops reading, so the sender's socket buffers fill and its
//     writes block, as TCP behaves through a short partition it survives.
//     When the stall lifts, everything held is delivered, late and intact.
//   - Cut: every connection is reset now, and new ones are reset at accept
//     until Heal.
//   - Heal: every fault of both directions is removed and Cut is lifted.
//
// Random choices (drops, jitter) come from a generator per connection and
// direction seeded by Config.Seed and the connection's accept number, and
// two values are drawn for every chunk whatever the faults, so the same
// chunks on the same connection draw the same decisions. TCP may merge
// writes into one read, so exact replay needs traffic that waits for each
// reply (request and response), which is how Kafka and etcd talk.
//
// Stats counts bytes forwarded and dropped per direction and connections
// accepted, refused, cut and active, for the chaos report.
//
// # Goroutines and locks
//
// A Proxy owns an accept loop, one handler per accepted connection while it
// dials, and four goroutines per connection (a reader and a writer per
// direction); Close cancels them all and waits. Proxy.mu guards the
// connection set, the upstream address and the cut and closed flags, and
// serialises fault changes; the faults themselves are published as an
// immutable snapshot (Proxy.state) that pumps load per chunk without a lock.
// A connection's close runs once (conn.once) and takes Proxy.mu afterwards to
// leave the set; nothing holds Proxy.mu while closing a socket.
package netproxy
