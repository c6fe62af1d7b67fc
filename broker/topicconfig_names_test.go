package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCleanupPolicyByKafkasName: clients name the config cleanup.policy
// (and the broker's log.cleanup.policy); a topic created with
// cleanup.policy=delete is made, compact is refused as unsupported, and
// DescribeConfigs lists it under Kafka's name. A rename once wrote it
// cleanup.Policy, which no client sends.
func TestCleanupPolicyByKafkasName(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del := "delete"
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &del}, "deletes")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create with cleanup.policy=delete: %v", err)
	}
	compact := "compact"
	resp, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "compacts")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("create with cleanup.policy=compact: %v, want INVALID_CONFIG", err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "deletes")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("deletes", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.MaybeValue() == "delete" {
			found = true
		}
	}
	if !found {
		t.Fatalf("DescribeConfigs of the topic lacks cleanup.policy=delete: %+v", rc.Configs)
	}
}
