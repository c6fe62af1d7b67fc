package broker

// Tests of --inter-broker-listener NAME over real brokers: the named
// listener of --listeners is the inter-broker listener (registered in etcd
// for the other brokers, never named to clients), and the brokers
// replicate over it with its protocol.

import (
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/sluice-mq/sluice/broker/kafka"
)

// TestInterBrokerListenerNamed: three brokers with --listeners
// CLIENT://…,BROKER://… and --inter-broker-listener BROKER (BROKER:SSL)
// replicate a topic with RF 3 and min.insync.replicas 3 over BROKER:
// every broker registers BROKER's address as its inter-broker address and
// only CLIENT as a client listener, Metadata names no BROKER address, the
// BROKER port speaks mutual TLS only, and no broker refused another.
func TestInterBrokerListenerNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	pki := newInterBrokerPKI(t, 3)
	c := startTestClusterWith(t, 3, func(cfg *Config) {
		pki.configure(cfg)
		cfg.Listeners = "CLIENT://127.0.0.1:0,BROKER://127.0.0.1:0"
		cfg.ListenerSecurityProtocolMap = "CLIENT:PLAINTEXT,BROKER:SSL"
		cfg.InterBrokerListener = "BROKER"
		// The named listener replaces both (cmd/sluiced clears their defaults).
		cfg.InterBrokerListen, cfg.InterBrokerSecurityProtocol = "", ""
	})
	createReplicatedWith(t, c, "named", map[string]string{"min.insync.replicas": "3"})
	const n = 20
	produceAll(t, c, "named", n) // acks=all with min.insync 3: every follower fetched over BROKER
	eventuallyTrue(t, "every replica in sync", func() (bool, string) {
		md := metadataOf(t, c.brokers[0])
		for _, mt := range md.Topics {
			for _, mp := range mt.Partitions {
				if *mt.Topic == "named" && len(mp.ISR) != 3 {
					return false, fmt.Sprintf("isr %v", mp.ISR)
				}
			}
		}
		return true, ""
	})

	interBroker := map[string]bool{}
	for _, b := range c.brokers {
		ib := b.kafka.InterBrokerAdvertise()
		if b.kafka.ListenerAddr("BROKER") != "" {
			t.Fatalf("broker %d binds BROKER as a client listener", b.Cfg.NodeID)
		}
		if _, port, _ := net.SplitHostPort(ib); port == "0" || port == "" {
			t.Fatalf("broker %d registers inter-broker address %q", b.Cfg.NodeID, ib)
		}
		adv := b.kafka.AdvertisedListeners()
		if _, ok := adv["BROKER"]; ok || len(adv) != 1 || adv["CLIENT"] == "" {
			t.Fatalf("broker %d advertises client listeners %v, want CLIENT alone", b.Cfg.NodeID, adv)
		}
		interBroker[ib] = true
		// What the other brokers read from etcd.
		for _, bi := range c.brokers[0].Brokers() {
			if bi.NodeID == b.Cfg.NodeID && (bi.InterBroker != ib || len(bi.Listeners) != 1 || bi.Listeners["CLIENT"] == "") {
				t.Fatalf("registration of %d: inter-broker %q listeners %v; want %q and CLIENT alone", bi.NodeID, bi.InterBroker, bi.Listeners, ib)
			}
		}
		// BROKER speaks SSL with client certificates: plain TCP is refused.
		if err := plainExchange(ib); err == nil {
			t.Fatalf("broker %d served plain TCP on its SSL inter-broker listener %s", b.Cfg.NodeID, ib)
		}
		for _, reason := range []string{kafka.RefusePrincipal} {
			if got := refusedConns(t, b, reason); got != 0 {
				t.Fatalf("broker %d refused %v inter-broker connections (%s) of the brokers", b.Cfg.NodeID, got, reason)
			}
		}
	}
	md := metadataOf(t, c.brokers[1])
	if len(md.Brokers) != 3 {
		t.Fatalf("Metadata names %d brokers, want 3", len(md.Brokers))
	}
	for _, mb := range md.Brokers {
		addr := net.JoinHostPort(mb.Host, strconv.Itoa(int(mb.Port)))
		if interBroker[addr] {
			t.Fatalf("Metadata on CLIENT names broker %d at its inter-broker address %s", mb.NodeID, addr)
		}
	}
}
