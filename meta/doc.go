// Package meta is Sluice's control plane over etcd. It owns the etcd
// connection (an embedded single- or multi-member etcd by default, or an
// existing cluster given by endpoints), the cluster id, and the durable
// metadata every broker agrees on: topics, committed offsets, producer ids,
// the registry of live brokers (registry.go) and the controller election
// (election.go) and partition state with leader epochs (partition.go) today;
// tenants, users, credentials, API keys and ACL bindings (security.go,
// security_acl.go), and per-tenant quotas (quota.go). It imports nothing else of
// Sluice's.
//
// # Key layout, version 1
//
// Every key lives under Config.Prefix (default "/sluice/"). Values are JSON
// objects carrying a "v" version field unless noted; a reader that meets a
// version newer than it knows fails with ErrUnknownVersion instead of
// guessing, and an undecodable value is ErrCorrupt, never a transient error.
//
//	<prefix>layout                          "1": the layout version, written once by the
//	                                        first Open; a newer number refuses to open
//	<prefix>cluster/id                      cluster id, 22 chars of base64url (raw string,
//	                                        written once with a create-only transaction)
//	<prefix>topics/<name>                   {"v":1,"name","id","partitions",
//	                                         "replication_factor","configs"}
//	<prefix>partitions/<topicID>/<n>        {"v":1,"replicas","leader","leader_epoch",
//	                                         "incarnations" (optional)}
//	                                        (partition.go): replicas[0] is the preferred
//	                                        leader, leader -1 means none; created leaderless
//	                                        at epoch 0 (the controller elects the first
//	                                        leader) with its
//	                                        topic key (one transaction, or chunks written
//	                                        before it), then changed only by a CAS on its
//	                                        mod revision (etcd's, not stored) carrying the
//	                                        controller's IfLeader; deleted with the topic.
//	                                        incarnations[i]: replicas[i]'s data-directory
//	                                        incarnation it was last in sync with (0: unknown)
//	<prefix>producer-ids/next               next unallocated idempotent producer id, decimal
//	                                        (raw string); only grows, by CAS
//	<prefix>heads/<topicID>/<n>             {"v":1,"log_start","clean","remote_end","epochs",
//	                                         "intents","objects","manifests"} (remote.go):
//	                                        the remote segment index head of tier/; created by
//	                                        the first upload, changed only by a transaction
//	                                        conditioned on its own mod revision and on the
//	                                        partition state's (the leader-epoch fence);
//	                                        deleted by tier/ after every object it names
//	<prefix>brokers/<node id>               {"v":1,"node_id","az","kafka","http",
//	                                        "inter_broker" (optional),"listeners"
//	                                        (optional: {name: host:port}),"pool" (optional:
//	                                        absent is "shared"),"started_ms"};
//	                                        bound to the broker's lease (default TTL 10 s),
//	                                        created only if absent (one incarnation per node
//	                                        id; its create revision is the incarnation),
//	                                        gone when the lease is revoked or expires;
//	                                        a restart that names its predecessor's lease
//	                                        revokes it and takes the key at once
//	                                        (RegisterTakingOver)
//	<prefix>draining/<node id>              RFC 3339 time (raw string): an operator's drain
//	                                        mark (drain.go); no lease, deleted by the broker
//	                                        when it registers at start-up or by an undrain
//	<prefix>reassignments/<topicID>/<n>     JSON {"v":1,"target":[…],"original":[…],
//	                                        "requested":…,"cancelled":…}: a pending partition
//	                                        reassignment (reassign.go); deleted by the
//	                                        controller when the replicas are the target
//	<prefix>reassign-synced/<topicID>/<n>/<node id>
//	                                        JSON {"v":1,"epoch":E,"end":X[,"log_end":Y]}: how
//	                                        far that replica holds the log of the leader of E
//	                                        (reassign.go); deleted with the reassignment
//	<prefix>controller/<lease id, hex>      node id, decimal (raw string): one key per
//	                                        candidate (concurrency.Election), bound to its
//	                                        session lease (default TTL 2 s); the key with the
//	                                        lowest create revision is the controller, and
//	                                        that create revision is the controller epoch
//	<prefix>usage/<node id>                 {"v":1,"tenants":{tenant: bytes}} (usage.go): the
//	                                        bytes retained by the partitions the broker leads,
//	                                        for the storage quota; bound to a lease of the
//	                                        broker's (TTL 6 s), rewritten every 2 s
//	<prefix>offsets/<tenant>/<group>/<topicID>/<n>
//	                                        {"v":1,"topic","offset","leader_epoch","metadata",
//	                                         "generation","commit_time_ms"}; <tenant> and
//	                                        <group> path-escaped; a commit of many
//	                                        partitions is one transaction (offsets.go),
//	                                        up to MaxTxnOps; CommitOffsetsIf conditions
//	                                        each transaction on the coordinator's fence
//	<prefix>group-claims/<tenant>/<group>   node id, decimal (raw string): the broker that
//	                                        coordinates the group, bound to its registration
//	                                        lease, created only if absent; every offset write
//	                                        of the group is conditioned on it (group_claims.go)
//	<prefix>group-commits/<tenant>/<group>  "<token>/<i>" (raw string): the last offset
//	                                        transaction of the group's coordinator; each
//	                                        commit is conditioned on its mod revision and
//	                                        moves it, so a retried commit of unknown
//	                                        outcome is recognised (group_commits.go)
//	<prefix>isr/<node id>                   {"v":1,"partitions":{"<topicID>:<n>":
//	                                         {"epoch","isr"}}} (isr.go): the in-sync set
//	                                        of every partition the broker leads, at the
//	                                        epoch it leads; written only by that broker,
//	                                        when a set changes, bound to its registration
//	                                        lease (gone with the registration)
//	<prefix>quota-usage/<node id>           {"v":1,"tenants":{"<tenant>":{"<quota key>":
//	                                         <units/s>}}} (quota_usage.go): the broker's
//	                                        measured demand of each tenant's quota keys,
//	                                        every 2 s, bound to its registration lease; each
//	                                        broker splits a tenant's cluster-wide rate by it
//	<prefix>security/tenants/<name>         {"v":1,"name","pool" (optional: absent is
//	                                        "shared"),"created_ms"} (security.go): a
//	                                        tenant; created only if absent, its pool changed
//	                                        by a transaction on its revision; "system" and
//	                                        "default" are created at start-up (EnsureTenant)
//	<prefix>security/users/<user>           {"v":1,"name","tenant","role","scram":{
//	                                         "<mechanism>":{"salt","stored_key","server_key",
//	                                         "iterations"}},"created_ms"}: <user> path-escaped;
//	                                        one key per username in the cluster; created only
//	                                        while its tenant exists; SCRAM salted keys only,
//	                                        never a password
//	<prefix>security/api-keys/<id>          {"v":1,"id","user","hash","created_ms",
//	                                         "description"} (security_acl.go): a hash of an
//	                                        HTTP API key, never the key; deleted with its user
//	                                        in one transaction
//	<prefix>security/acls/<tenant>/<hash>   {"v":1,"tenant","resource_type","resource_name",
//	                                         "pattern_type","principal","host","operation",
//	                                         "permission"}: one ACL binding in Kafka's wire
//	                                        codes; <hash> is 32 hex digits of SHA-256 over
//	                                        the binding, so an identical binding is one key;
//	                                        deleted with its tenant
//	<prefix>quotas/<tenant>                 {"v":1,"tenant","limits":{"<key>":<value>},
//	                                         "weight","priority_class"} (quota.go): a
//	                                        tenant's quotas and scheduling attributes;
//	                                        written only while the tenant exists, deleted
//	                                        with it (DeleteTenant's transaction) or when
//	                                        only defaults are left; followed by WatchQuotas
//	<prefix>uploads/<id>                    {"v":1,"id","tenant","topic","size","sha256",
//	                                         "state","object_key","upload_id","received",
//	                                         "parts","hash_state",...} (uploads.go): a
//	                                        large-payload upload session (broker/largeobj);
//	                                        created only if absent, changed and deleted
//	                                        only by transactions on its mod revision,
//	                                        each moving its tenant's upload-bytes counter
//	<prefix>upload-bytes/<tenant>           {"v":1,"tenant","open","stored","repairs"}
//	                                        (upload_bytes.go): the declared bytes of the
//	                                        tenant's open sessions and the bytes of its
//	                                        completed and published objects, for the storage
//	                                        quotas; <tenant> path-escaped; changed in the
//	                                        transaction of every upload write that changes
//	                                        what the record counts (conditioned on both mod
//	                                        revisions) and by recounts; never deleted
//	<prefix>upload-bytes-counted            decimal revision (raw string): the counters are
//	                                        complete; written with a new layout, or by the
//	                                        first complete recount of an older one; before
//	                                        it exists readers sum the upload records
//	<prefix>largerefs/o/<ref>/<topicID>/<n> {"v":1,"ref","topic_id","partition","open",
//	<prefix>largerefs/p/<topicID>/<n>/<ref>  "claimed_ms","upto",...} (largerefs.go): the
//	                                        reference ledger of large payloads, one entry
//	                                        per (object, partition) under both keys,
//	                                        always written together
//
// Everything under <prefix>security/ is followed by one watch
// (WatchSecurity, security_watch.go), so brokers see a consistent state of
// tenants, users, keys and ACLs at one revision.
//
// <topicID> is the topic's UUID in its canonical 36-character text form; <n>
// is the partition number in decimal. Partition and offset keys hang off the
// topic ID, not the name, so a deleted and recreated topic never inherits the
// state of its predecessor.
//
// Invariant: a topic key's ID never changes while the key exists; a new
// creation of the same name gets a new random ID.
// Invariant: a topic's partition count never decreases.
// Invariant: every topic write is a transaction conditioned on the key's
// creation or mod revision, so concurrent writers cannot lose each other's
// updates (ErrTopicExists or ErrConflict instead).
// Invariant: a partition key exists only under a topic ID whose topic key
// covers it (n < partitions), except while an AddTopicPartitions or a chunked
// CreateTopicWithPartitions is under way or after one failed ambiguously;
// readers ignore keys beyond the count.
// Invariant: a partition's leader epoch never decreases, and an epoch names
// at most one leader.
// Invariant: a broker key exists only while the lease that created it
// lives; no other lease can take the node id meanwhile (ErrNodeIDInUse),
// except by revoking that lease when the caller names it (RegisterTakingOver).
// Invariant: an isr key exists only while the registration lease that wrote
// it lives, and its sets are read only for the leader and epoch they name.
// Invariant: usernames are unique in the cluster; a user, API key or ACL
// binding exists only while what it belongs to (tenant, user, tenant) does.
// Invariant: controller epochs strictly increase, and every controller
// write carries Controller.IfLeader (its election key at its epoch), so a
// deposed controller's writes fail even before it notices it lost.
//
// # Security of the etcd connection
//
// With Endpoints, the client speaks TLS when any endpoint is https:// or a
// TLS file is given (etcdsecurity.go): CACertFile verifies the servers
// (default: the system roots), CertFile and KeyFile are the client
// certificate etcd's --client-cert-auth asks for, and Username with the
// first line of PasswordFile logs in to etcd's own authentication (the user
// needs read and write on Prefix). An http:// endpoint with TLS files is a
// configuration error, as is a mix of http:// and https:// endpoints.
//
// The embedded member has one secure mode per port, always mutual:
//   - client port: CACertFile, CertFile and KeyFile together. The member
//     serves CertFile and requires client certificates from CACertFile's
//     CAs; this process dials its member with the same three files, so
//     CertFile needs both server and client usage and must name the address
//     dialled (the listen host, or 127.0.0.1 for 0.0.0.0). etcdctl gets in
//     with any client certificate from that CA. The same flags thus mean
//     "the TLS of etcd's client port" whichever side of it this process is.
//   - peer port: PeerCertFile, PeerKeyFile and PeerTrustedCAFile together;
//     every peer URL (ListenPeer, each InitialCluster member) is then
//     https://, and an http:// one in InitialCluster is refused by
//     Validate (as is an https:// one without peer TLS).
//
// Open reads every file before starting anything, so a missing or
// malformed one is named. Its first contact retries an etcd that does not
// answer (it may be starting) until StartTimeout, but fails at once, with
// the TLS or etcd error, when etcd refuses the handshake or the login.
//
// # Concurrency
//
// A Store is safe for concurrent use; all of its state is either immutable
// after Open or guarded by Store.mu. Goroutines it starts (topic, partition,
// broker and security watchers, registration keep-alives, controller watchdogs, and
// the embedded server's error logger) are owned by the Store and waited for in Close.
// Closing the Store does not revoke registration or controller leases (it
// is what a crash looks like to the cluster): they expire after their TTL.
// Registration.Close and Controller.Resign end them at once.
//
// # Logging
//
// Open takes the process's zerolog logger. Its own lines carry
// component=meta; the embedded etcd server's and the etcd client's zap logs
// are forwarded at warn level and above with component=etcd.
package meta
