package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// TestStoreUnreachableOrRefusedExitsTwo runs commands that read the bucket
// against a real S3 server that refuses them (wrong secret, no such bucket)
// and against an endpoint where nothing listens. None of them may report
// the refusal as problems found (exit status 1, "4 problems"): a command
// that cannot read the store did not finish, which is exit status 2.
func TestStoreUnreachableOrRefusedExitsTwo(t *testing.T) {
	f := newFixture(t)
	srv := s3test.Start(t)
	closed := freeport.Must(t) // nothing listens there
	withEndpoint := func(u, endpoint string) string {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		q := p.Query()
		q.Set("endpoint", endpoint)
		p.RawQuery = q.Encode()
		return p.String()
	}
	missingBucket := strings.Replace(srv.URL("tier"), "s3://"+srv.Bucket, "s3://no-such-bucket", 1)
	cases := []struct {
		name   string
		store  string
		secret string
	}{
		{"wrong secret", srv.URL("tier"), "not-" + srv.SecretKey},
		{"no such bucket", missingBucket, srv.SecretKey},
		{"nothing listens", withEndpoint(srv.URL("tier"), "http://"+closed), srv.SecretKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
			t.Setenv("AWS_SECRET_ACCESS_KEY", tc.secret)
			t.Setenv("AWS_REGION", srv.Region)
			t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			for _, cmd := range [][]string{{"verify"}, {"ls"}, {"stat"}, {"diff"}, {"dump", "orders/0", "--offset", "0"}} {
				args := append([]string{"--object-store", tc.store}, cmd...)
				code, stdout, stderr := f.run(t, args...)
				if testing.Verbose() {
					t.Logf("tierctl %s: exit %d: %s", cmd[0], code, stderr)
				}
				if code != 2 || !strings.Contains(stderr, "object store") {
					t.Fatalf("tierctl %s: exit %d, want 2 with the object store named on stderr\nstdout:\n%s\nstderr:\n%s", cmd[0], code, stdout, stderr)
				}
			}
		})
	}
}
