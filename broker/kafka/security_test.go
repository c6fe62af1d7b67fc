package kafka_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/kafka"
)

var execLookPath = exec.LookPath

var testUsers = users{"alice": "alice-secret", "bob": "bob-secret"}

// produceConsume writes one record to topic through cl and reads it back.
func produceConsume(t *testing.T, cl *kgo.Client, topic string, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	cl.AddConsumeTopics(topic)
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %v", topic, err)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("consume %s: %v", topic, e.Err)
		}
		for _, r := range fs.Records() {
			if string(r.Value) == value {
				return
			}
		}
	}
}

// franz-go with SCRAM-SHA-512 and SCRAM-SHA-256 (and PLAIN) over TLS: the
// records go through, so Metadata named the SASL_SSL listener's address
// (a PLAINTEXT one would fail the TLS handshake).
func TestSASLOverTLSWithFranzGo(t *testing.T) {
	sb := startSecureBroker(t, nil, kafka.WithCredentials(testUsers.lookup(t)))
	tlsCfg := sb.pki.clientTLS(t, false)
	for _, tc := range []struct {
		name string
		opt  kgo.Opt
	}{
		{"SCRAM-SHA-512", kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())},
		{"SCRAM-SHA-256", kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism())},
		{"PLAIN over TLS", kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := sb.client(t, "SASL_SSL", tc.opt, kgo.DialTLSConfig(tlsCfg))
			produceConsume(t, cl, "orders-"+strings.ToLower(strings.ReplaceAll(tc.name, " ", "-")), "hello "+tc.name)
		})
	}
}

// scramLogin runs a SCRAM exchange over c and returns the final
// SaslAuthenticate response (or the first one, if it failed).
func scramLogin(t *testing.T, c *rawConn, mech, user, pass string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hg := xscram.SHA512
	if mech == auth.MechanismScramSHA256 {
		hg = xscram.SHA256
	}
	hs, err := c.roundTrip(handshake(mech))
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if code := hs.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		t.Fatalf("handshake %s: error %d", mech, code)
	}
	client, err := hg.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := client.NewConversation()
	first, _ := conv.Step("")
	resp, err := c.roundTrip(authenticate([]byte(first)))
	if err != nil {
		t.Fatalf("client-first: %v", err)
	}
	ar := resp.(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != 0 {
		return ar
	}
	final, err := conv.Step(string(ar.SASLAuthBytes))
	if err != nil {
		t.Fatalf("client-final: %v", err)
	}
	resp, err = c.roundTrip(authenticate([]byte(final)))
	if err != nil {
		t.Fatalf("client-final: %v", err)
	}
	return resp.(*kmsg.SASLAuthenticateResponse)
}

// Each refusal is answered with its code and the connection closed: no
// request after it is served.
func TestSASLRefusals(t *testing.T) {
	sb := startSecureBroker(t, nil, kafka.WithCredentials(testUsers.lookup(t)))
	tlsCfg := sb.pki.clientTLS(t, false)
	var failedMsgs []string
	for _, tc := range []struct {
		name     string
		listener string
		run      func(t *testing.T, c *rawConn) // answers the refusal
	}{
		{"wrong password", "SASL_SSL", func(t *testing.T, c *rawConn) {
			ar := scramLogin(t, c, auth.MechanismScramSHA512, "alice", "wrong")
			if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil {
				t.Fatalf("wrong password answered %d %v, want SASL_AUTHENTICATION_FAILED with a message", ar.ErrorCode, ar.ErrorMessage)
			}
			failedMsgs = append(failedMsgs, *ar.ErrorMessage)
		}},
		{"unknown user", "SASL_SSL", func(t *testing.T, c *rawConn) {
			ar := scramLogin(t, c, auth.MechanismScramSHA512, "mallory", "whatever")
			if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil {
				t.Fatalf("unknown user answered %d %v, want SASL_AUTHENTICATION_FAILED with a message", ar.ErrorCode, ar.ErrorMessage)
			}
			failedMsgs = append(failedMsgs, *ar.ErrorMessage)
		}},
		{"PLAIN on a plaintext listener", "SASL_PLAINTEXT", func(t *testing.T, c *rawConn) {
			resp, err := c.roundTrip(handshake(auth.MechanismPlain))
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			hs := resp.(*kmsg.SASLHandshakeResponse)
			if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || slices.Contains(hs.SupportedMechanisms, auth.MechanismPlain) {
				t.Fatalf("PLAIN without TLS answered %d %v, want UNSUPPORTED_SASL_MECHANISM without PLAIN listed", hs.ErrorCode, hs.SupportedMechanisms)
			}
		}},
		{"a request before authentication", "SASL_SSL", func(t *testing.T, c *rawConn) {
			if resp, err := c.roundTrip(metadataRequest()); err == nil {
				t.Fatalf("Metadata before authentication answered %+v", resp)
			}
		}},
		{"authenticate without a handshake", "SASL_PLAINTEXT", func(t *testing.T, c *rawConn) {
			resp, err := c.roundTrip(authenticate([]byte("n,,n=alice,r=abc")))
			if err != nil {
				t.Fatalf("authenticate: %v", err)
			}
			if code := resp.(*kmsg.SASLAuthenticateResponse).ErrorCode; code != kerr.IllegalSaslState.Code {
				t.Fatalf("authenticate without a handshake answered %d, want ILLEGAL_SASL_STATE", code)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg *tls.Config
			if tc.listener == "SASL_SSL" {
				cfg = tlsCfg
			}
			c := dialRaw(t, sb.addr[tc.listener], cfg)
			tc.run(t, c)
			if !c.closedByBroker() {
				t.Fatal("the connection stays open after the refusal")
			}
		})
	}
	if len(failedMsgs) == 2 && failedMsgs[0] != failedMsgs[1] {
		t.Errorf("a wrong password (%q) and an unknown user (%q) are told apart", failedMsgs[0], failedMsgs[1])
	}
}

// fakeClock is a settable clock for session lifetimes.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// KIP-368: the session lifetime is answered, a re-authentication extends
// it, and a request after it ran out closes the connection unanswered.
func TestSASLSessionLifetime(t *testing.T) {
	clock := newFakeClock()
	sb := startSecureBroker(t, func(c *broker.Config) { c.SASLSessionLifetime = time.Minute },
		kafka.WithCredentials(testUsers.lookup(t)), kafka.WithClock(clock.Now))
	c := dialRaw(t, sb.addr["SASL_PLAINTEXT"], nil)
	ar := scramLogin(t, c, auth.MechanismScramSHA256, "alice", "alice-secret")
	if ar.ErrorCode != 0 || ar.SessionLifetimeMillis != time.Minute.Milliseconds() {
		t.Fatalf("login answered %d with session lifetime %d ms, want 0 and %d", ar.ErrorCode, ar.SessionLifetimeMillis, time.Minute.Milliseconds())
	}
	if _, err := c.roundTrip(metadataRequest()); err != nil {
		t.Fatalf("Metadata within the session: %v", err)
	}
	clock.Advance(45 * time.Second)
	if ar := scramLogin(t, c, auth.MechanismScramSHA256, "alice", "alice-secret"); ar.ErrorCode != 0 {
		t.Fatalf("re-authentication answered %d", ar.ErrorCode)
	}
	clock.Advance(45 * time.Second) // 90 s after the first login, 45 s after the second
	if _, err := c.roundTrip(metadataRequest()); err != nil {
		t.Fatalf("Metadata within the re-authenticated session: %v", err)
	}
	clock.Advance(16 * time.Second)
	if resp, err := c.roundTrip(metadataRequest()); err == nil {
		t.Fatalf("Metadata after the session expired answered %+v", resp)
	}
}

// authzFunc adapts a function to kafka.Authorizer.
type authzFunc func(id auth.Identity, host string, op acl.Operation, rt acl.ResourceType, name string) acl.Decision

func (f authzFunc) Authorize(id auth.Identity, host string, op acl.Operation, rt acl.ResourceType, name string) acl.Decision {
	return f(id, host, op, rt, name)
}

// principals records who the authoriser was asked about.
type principals struct {
	mu   sync.Mutex
	seen []auth.Principal
}

func (p *principals) add(pr auth.Principal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.seen, pr) {
		p.seen = append(p.seen, pr)
	}
}

func (p *principals) has(pr auth.Principal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.seen, pr)
}

// Mutual TLS: the client certificate's CN is the principal; an SSL
// listener with a client CA refuses a client without a certificate.
func TestMutualTLSPrincipal(t *testing.T) {
	var seen principals
	az := authzFunc(func(id auth.Identity, _ string, _ acl.Operation, _ acl.ResourceType, _ string) acl.Decision {
		seen.add(id.Principal)
		return acl.Decision{Allowed: true}
	})
	sb := startSecureBroker(t, nil, kafka.WithCredentials(testUsers.lookup(t)), kafka.WithAuthorizer(az))
	cl := sb.client(t, "SSL", kgo.DialTLSConfig(sb.pki.clientTLS(t, true)))
	produceConsume(t, cl, "mtls", "over mutual TLS")
	want := auth.Principal{Tenant: auth.DefaultTenant, User: "client1"}
	if !seen.has(want) {
		t.Fatalf("authoriser saw %v, want %v among them", seen.seen, want)
	}
	c := dialRaw(t, sb.addr["SSL"], sb.pki.clientTLS(t, false))
	if resp, err := c.roundTrip(metadataRequest()); err == nil {
		t.Fatalf("a client without a certificate was answered %+v", resp)
	}
}

// The authorise stage: refused topics and groups are answered with their
// *_AUTHORIZATION_FAILED code, the rest of the request is served, and
// Metadata lists only what the principal may describe.
func TestAuthoriseStage(t *testing.T) {
	az := authzFunc(func(_ auth.Identity, _ string, op acl.Operation, rt acl.ResourceType, name string) acl.Decision {
		if (rt == acl.ResourceTopic && name == "secret" && op != acl.OpCreate) || (rt == acl.ResourceGroup && name == "secret-group") {
			return acl.Decision{Reason: "test denies it"}
		}
		return acl.Decision{Allowed: true}
	})
	sb := startSecureBroker(t, nil, kafka.WithCredentials(testUsers.lookup(t)), kafka.WithAuthorizer(az))
	c := dialRaw(t, sb.addr["PLAINTEXT"], nil)

	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(7)
	for _, name := range []string{"secret", "open"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		ct.Topics = append(ct.Topics, rt)
	}
	resp, err := c.roundTrip(ct)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("create %s: %d", rt.Topic, rt.ErrorCode)
		}
	}

	resp, err = c.roundTrip(metadataRequest())
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
		listed = append(listed, *mt.Topic)
	}
	if !slices.Equal(listed, []string{"open"}) {
		t.Fatalf("Metadata of all topics listed %v, want [open]", listed)
	}
	named := metadataRequest()
	named.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("secret")}}
	resp, err = c.roundTrip(named)
	if err != nil {
		t.Fatal(err)
	}
	if mt := resp.(*kmsg.MetadataResponse).Topics; len(mt) != 1 || mt[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Metadata of secret answered %+v, want TOPIC_AUTHORIZATION_FAILED", mt)
	}

	pr := kmsg.NewPtrProduceRequest()
	pr.SetVersion(9)
	pr.Acks, pr.TimeoutMillis = -1, 10000
	for _, name := range []string{"secret", "open"} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = name
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = brokertest.Batch(1, -1, -1, -1, time.Now().UnixMilli())
		rt.Partitions = append(rt.Partitions, rp)
		pr.Topics = append(pr.Topics, rt)
	}
	resp, err = c.roundTrip(pr)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, rt := range resp.(*kmsg.ProduceResponse).Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if codes["secret"] != kerr.TopicAuthorizationFailed.Code || codes["open"] != 0 {
		t.Fatalf("produce answered %v, want secret TOPIC_AUTHORIZATION_FAILED and open 0", codes)
	}

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(5)
	dt.TopicNames = []string{"secret"}
	resp, err = c.roundTrip(dt)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.(*kmsg.DeleteTopicsResponse).Topics; len(got) != 1 || got[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || got[0].ErrorMessage == nil {
		t.Fatalf("DeleteTopics of secret answered %+v, want TOPIC_AUTHORIZATION_FAILED with a message", got)
	}
	if sb.LookupTopic("secret") == nil {
		t.Fatal("a refused DeleteTopics deleted the topic")
	}

	jg := kmsg.NewPtrJoinGroupRequest()
	jg.SetVersion(5)
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = "secret-group", "consumer", 10000, 10000
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	resp, err = c.roundTrip(jg)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.JoinGroupResponse).ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("JoinGroup of secret-group answered %d, want GROUP_AUTHORIZATION_FAILED", code)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.SetVersion(7)
	of.Group = "secret-group"
	resp, err = c.roundTrip(of)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.OffsetFetchResponse).ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("OffsetFetch of secret-group answered %d, want GROUP_AUTHORIZATION_FAILED", code)
	}
}

// A new certificate written over the files is served to new connections
// without a restart.
func TestCertificateRotation(t *testing.T) {
	sb := startSecureBroker(t, nil, kafka.WithCredentials(testUsers.lookup(t)))
	serial := func() string {
		c := dialRaw(t, sb.addr["SASL_SSL"], sb.pki.clientTLS(t, false))
		return c.nc.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	old := serial()
	sb.pki.issue(t, "broker", "localhost", 3) // certgen.Both, over the same files
	deadline := time.Now().Add(20 * time.Second)
	for serial() == old {
		if time.Now().After(deadline) {
			t.Fatal("the new certificate was not served within 20s")
		}
		time.Sleep(50 * time.Millisecond) // the source re-reads its files at most once a second
	}
}

// kcat (librdkafka) with SCRAM-SHA-512 and SCRAM-SHA-256 over TLS, and with
// mutual TLS. Debian 12's librdkafka (2.0.2) sends the SCRAM client-final
// nonce in its pre-2.6.1 form, which the broker accepts by default.
func TestKcatSecurity(t *testing.T) {
	kcat := requireTool(t, "kcat")
	sb := startSecureBroker(t, nil, kafka.WithCredentials(testUsers.lookup(t)))
	p := sb.pki
	for _, tc := range []struct {
		name     string
		listener string
		args     []string
	}{
		{"PLAIN", "SASL_SSL", []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=PLAIN",
			"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-X", "ssl.ca.location=" + p.caFile}},
		{"SCRAM-SHA-512", "SASL_SSL", []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-X", "ssl.ca.location=" + p.caFile}},
		{"SCRAM-SHA-256", "SASL_SSL", []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-256",
			"-X", "sasl.username=bob", "-X", "sasl.password=bob-secret", "-X", "ssl.ca.location=" + p.caFile}},
		{"mutual TLS", "SSL", []string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + p.caFile,
			"-X", "ssl.certificate.location=" + p.clientCert, "-X", "ssl.key.location=" + p.clientK}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "kcat-" + strings.ToLower(strings.ReplaceAll(tc.name, " ", "-"))
			base := append([]string{"-b", sb.addr[tc.listener], "-t", topic}, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if os.Getenv("KCAT_DEBUG") != "" {
				base = append(base, "-d", "security")
			}
			prod := exec.CommandContext(ctx, kcat, append(base, "-P")...)
			prod.Stdin = strings.NewReader("hello from kcat\n")
			if out, err := prod.CombinedOutput(); err != nil {
				t.Fatalf("kcat -P: %v\n%s", err, out)
			}
			cons := exec.CommandContext(ctx, kcat, append(base, "-C", "-o", "beginning", "-c", "1", "-e")...)
			out, err := cons.CombinedOutput()
			if err != nil || !bytes.Contains(out, []byte("hello from kcat")) {
				t.Fatalf("kcat -C: %v\n%s", err, out)
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, kcat, "-b", sb.addr["SASL_SSL"], "-L", "-m", "3",
			"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=alice", "-X", "sasl.password=nope", "-X", "ssl.ca.location="+p.caFile).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !bytes.Contains(out, []byte("Authentication failed")) {
			t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
		}
	})
}

// confluent-kafka-python (librdkafka) over SASL_SSL with PLAIN and both
// SCRAM mechanisms, whatever its librdkafka version (before 2.6.1 its
// client-final nonce is the legacy form the broker accepts by default).
// Skipped without the module, except in CI.
func TestConfluentPythonSASL(t *testing.T) {
	const python = "/usr/bin/python3"
	out, err := exec.Command(python, "-c", "import confluent_kafka; print(confluent_kafka.libversion()[0])").CombinedOutput()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s with confluent_kafka is required in CI: %v: %s", python, err, out)
		}
		t.Skipf("%s has no confluent_kafka: %s", python, bytes.TrimSpace(out))
	}
	t.Logf("librdkafka %s", bytes.TrimSpace(out))
	sb := startSecureBroker(t, nil, kafka.WithCredentials(testUsers.lookup(t)))
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"} {
		t.Run(mech, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := exec.CommandContext(ctx, python, "testdata/confluent_sasl.py", "--bootstrap", sb.addr["SASL_SSL"],
				"--mechanism", mech, "--user", "alice", "--password", "alice-secret", "--cafile", sb.pki.caFile,
				"--topic", "confluent-"+strings.ToLower(mech)).CombinedOutput()
			if err != nil || !bytes.Contains(res, []byte("OK")) {
				t.Fatalf("confluent_sasl.py: %v\n%s", err, res)
			}
		})
	}
}

// librdkafkaLegacyNonce reports whether kcat's librdkafka (from kcat -V) is
// older than 2.6.1, whose SCRAM client-final repeats the client nonce.
func librdkafkaLegacyNonce(kcat string) bool {
	out, _ := exec.Command(kcat, "-V").CombinedOutput()
	_, rest, ok := strings.Cut(string(out), "librdkafka ")
	if !ok {
		return false
	}
	ver, _, _ := strings.Cut(rest, " ")
	var major, minor, patch int
	if _, err := fmt.Sscanf(ver, "%d.%d.%d", &major, &minor, &patch); err != nil {
		return false
	}
	return major < 2 || (major == 2 && (minor < 6 || (minor == 6 && patch < 1)))
}

// With --sasl-scram-strict-nonce the broker refuses the legacy nonce as
// Kafka 4 does: kcat on a librdkafka older than 2.6.1 fails to log in with
// SCRAM, and franz-go (RFC nonce) still logs in.
func TestKcatScramStrictNonce(t *testing.T) {
	kcat := requireTool(t, "kcat")
	if !librdkafkaLegacyNonce(kcat) {
		t.Skip("this kcat's librdkafka is 2.6.1 or later and sends the RFC nonce")
	}
	sb := startSecureBroker(t, func(c *broker.Config) { c.SASLScramStrictNonce = true }, kafka.WithCredentials(testUsers.lookup(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kcat, "-b", sb.addr["SASL_SSL"], "-L", "-m", "3",
		"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-X", "ssl.ca.location="+sb.pki.caFile).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !bytes.Contains(out, []byte("Authentication failed")) {
		t.Fatalf("kcat against --sasl-scram-strict-nonce: %v, want an authentication failure\n%s", err, out)
	}
	cl := sb.client(t, "SASL_SSL", kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.DialTLSConfig(sb.pki.clientTLS(t, false)))
	produceConsume(t, cl, "strict-nonce", "franz-go still logs in")
}
