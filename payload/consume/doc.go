// Package consume is a commit-gating consumer of large payloads: it runs a
// franz-go consumer-group client, opens each record's payload with
// payload.Client.Open and hands the handler the verifying stream, and
// commits a partition's offset only past records whose payload was read
// to its end, verified (size and SHA-256) and handled without error.
//
// # Per partition
//
//	record r ──Open──► handler(ctx, r, body) ──► drain body to io.EOF ──► mark r+1
//	             │              │                        │
//	             └──── any error (ErrMissing, ErrChecksum, S3 5xx, the handler's)
//	                         │
//	                         ▼
//	      SetOffsets(partition → r) and pause it; after Backoff(attempt)
//	      resume: r is fetched and handled again; nothing past r is marked
//
// Records of one partition are handled in offset order, one at a time;
// other partitions go on while one waits. Marked offsets are committed by
// the client's autocommit (kgo.AutoCommitMarks, Config.CommitInterval),
// when partitions are revoked, and at Close. A record that never succeeds
// holds its partition forever: Config.OnError sees every failure (with the
// attempt number) and is the place to alert or give up (cancel Run's
// context).
//
// The handler must not keep body after it returns. If it returns nil
// without reading body to its end, the rest is read and verified before
// the record counts as done (a handler should read to io.EOF before it
// acts on the bytes irreversibly: the checksum is known only then).
package consume
