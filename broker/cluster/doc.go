// Package cluster is this broker's part in the cluster: its registration
// under an etcd lease and the view of the live brokers, the controller's
// election and its elector, isolation, the transport of replication and
// election messages between brokers, the follower fetchers, the published
// in-sync sets and where consumer groups are placed. It works over the
// broker's Node and is told the addresses it registers (SetAddrs); it
// knows no protocol front end.
package cluster
