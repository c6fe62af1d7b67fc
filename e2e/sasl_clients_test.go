package e2e

// SCRAM over a SASL_PLAINTEXT listener with the other Go clients: IBM/sarama
// (with xdg-go/scram as its SCRAM client) and segmentio/kafka-go (its
// sasl/scram), against the real binary with security on. The user is
// created through the HTTP admin API by the bootstrap super user; each
// client writes and reads its records back, and a wrong password is
// refused.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kgoscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/xdg-go/scram"
)

// startSASLBroker runs sluiced with one SASL_PLAINTEXT listener, security
// on, and a user "carl" of tenant "default" made over the HTTP API.
func startSASLBroker(t *testing.T) *broker {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "admin-password")
	if err := os.WriteFile(pw, []byte("admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, brokerOptions{saslListener: true, extraArgs: []string{
		"--security", "--admin-password-file", pw, "--allow-everyone-if-no-acl-found",
	}})
	req, err := http.NewRequest("POST", "http://"+b.httpAddr+"/v1/users",
		strings.NewReader(`{"name":"carl","tenant":"default","password":"carl-secret"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("admin", "admin-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create user carl: status %d", resp.StatusCode)
	}
	return b
}

// xdgSCRAM is sarama's SCRAM client over xdg-go/scram.
type xdgSCRAM struct {
	conv *scram.ClientConversation
}

func (x *xdgSCRAM) Begin(user, password, authzID string) error {
	c, err := scram.SHA512.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}

func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conv.Done() }

func saramaSASL(password string) *sarama.Config {
	cfg := saramaConfig(sarama.V3_6_0_0)
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
	cfg.Net.SASL.User, cfg.Net.SASL.Password = "carl", password
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{} }
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Metadata.Retry.Max = 3
	return cfg
}

func TestSaramaSCRAM(t *testing.T) {
	b := startSASLBroker(t)
	prod, err := sarama.NewSyncProducer([]string{b.kafkaAddr}, saramaSASL("carl-secret"))
	if err != nil {
		t.Fatalf("producer over SCRAM-SHA-512: %v", err)
	}
	defer prod.Close()
	_, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama-scram", Value: sarama.StringEncoder("over scram")})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	cons, err := sarama.NewConsumer([]string{b.kafkaAddr}, saramaSASL("carl-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("sarama-scram", 0, off)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		if string(m.Value) != "over scram" {
			t.Fatalf("read %q", m.Value)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no record within 30s")
	}
	if _, err := sarama.NewClient([]string{b.kafkaAddr}, saramaSASL("wrong")); err == nil {
		t.Fatal("a wrong password connected")
	}
}

func TestKafkaGoSCRAM(t *testing.T) {
	b := startSASLBroker(t)
	mech, err := kgoscram.Mechanism(kgoscram.SHA512, "carl", "carl-secret")
	if err != nil {
		t.Fatal(err)
	}
	transport := &kafka.Transport{SASL: mech}
	w := &kafka.Writer{Addr: kafka.TCP(b.kafkaAddr), Topic: "kafkago-scram", Transport: transport,
		RequiredAcks: kafka.RequireAll, AllowAutoTopicCreation: true}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var werr error
	for i := 0; i < 50; i++ { // the topic is created by the first attempt
		if werr = w.WriteMessages(ctx, kafka.Message{Value: []byte("over scram")}); werr == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if werr != nil {
		t.Fatalf("write over SCRAM-SHA-512: %v", werr)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.kafkaAddr}, Topic: "kafkago-scram", Partition: 0,
		Dialer: &kafka.Dialer{Timeout: 10 * time.Second, SASLMechanism: mech}})
	defer r.Close()
	m, err := r.ReadMessage(ctx)
	if err != nil || string(m.Value) != "over scram" {
		t.Fatalf("read %q: %v", m.Value, err)
	}
	bad, err := kgoscram.Mechanism(kgoscram.SHA512, "carl", "wrong")
	if err != nil {
		t.Fatal(err)
	}
	d := &kafka.Dialer{Timeout: 10 * time.Second, SASLMechanism: bad}
	if c, err := d.DialContext(ctx, "tcp", b.kafkaAddr); err == nil {
		c.Close()
		t.Fatal("a wrong password connected")
	} else if !strings.Contains(fmt.Sprint(err), "SASL") && !strings.Contains(fmt.Sprint(err), "Authentication") {
		t.Logf("refused: %v", err)
	}
}
