package s3fault

// Against the real S3 server: versitygw started by tier/objstore/s3test,
// reached by the AWS SDK's own client through the proxy, so SigV4 signatures
// made for the proxy's address must validate at the gateway.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// sdkClient is an S3 client of srv's bucket whose endpoint is the proxy,
// path-style, and which never retries, so each call is one request.
func sdkClient(srv *s3test.Server, p *Proxy) *s3.Client {
	return s3.New(s3.Options{
		Region:       srv.Region,
		BaseEndpoint: aws.String(p.URL()),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
		Retryer:      aws.NopRetryer{},
		HTTPClient:   awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.Proxy = nil }),
	})
}

// apiError returns the S3 error code and HTTP status of err, or fails.
func apiError(t *testing.T, err error) (string, int) {
	t.Helper()
	var api smithy.APIError
	var resp *awshttp.ResponseError
	if !errors.As(err, &api) || !errors.As(err, &resp) {
		t.Fatalf("error %v is not an S3 API error with a response", err)
	}
	return api.ErrorCode(), resp.HTTPStatusCode()
}

func TestRealS3ThroughProxy(t *testing.T) {
	srv := s3test.Start(t)
	p := newProxy(t, srv.Endpoint, 1)
	c := sdkClient(srv, p)
	ctx := context.Background()
	bucket := aws.String(srv.Bucket)
	// Over 2 MiB, so the SDK sends Expect: 100-continue, and odd bytes in the
	// key, so the signed path must pass as encoded.
	body := randomBytes(3<<20 + 17)
	key := aws.String("seg/00000000000000000042-1 a+b.obj")

	// No faults: every signature made for the proxy's address validates.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: key, Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body)))}); err != nil {
		t.Fatalf("PutObject through the proxy: %v", err)
	}
	if got := getObject(t, c, bucket, key, nil); !bytes.Equal(got, body) {
		t.Fatalf("GetObject returned %d bytes, not the %d put", len(got), len(body))
	}
	if got := getObject(t, c, bucket, key, aws.String("bytes=100-199")); !bytes.Equal(got, body[100:200]) {
		t.Fatalf("ranged GetObject returned %x", got)
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: key})
	if err != nil || aws.ToInt64(head.ContentLength) != int64(len(body)) {
		t.Fatalf("HeadObject: %v, length %d", err, aws.ToInt64(head.ContentLength))
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket, Prefix: aws.String("seg/")})
	if err != nil || len(list.Contents) != 1 || aws.ToString(list.Contents[0].Key) != *key {
		t.Fatalf("ListObjectsV2: %v, %d objects", err, len(list.Contents))
	}

	// SlowDown on PUT: the SDK sees S3's throttling error, and nothing is written.
	setFaults(t, p, Faults{Put: OpFaults{SlowDownRate: 1}})
	throttled := aws.String("seg/throttled.obj")
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: throttled, Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body)))})
	if err == nil {
		t.Fatal("PutObject succeeded with SlowDown rate 1")
	}
	if code, status := apiError(t, err); code != "SlowDown" || status != http.StatusServiceUnavailable {
		t.Fatalf("PutObject failed with code %q, status %d; want SlowDown, 503", code, status)
	}
	// GETs have no faults set.
	if got := getObject(t, c, bucket, key, nil); !bytes.Equal(got, body) {
		t.Fatal("GetObject after the SlowDown differs")
	}

	// InternalError on GET, as the SDK reads it.
	setFaults(t, p, Faults{Get: OpFaults{InternalErrorRate: 1}})
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: key})
	if code, status := apiError(t, err); code != "InternalError" || status != http.StatusInternalServerError {
		t.Fatalf("GetObject failed with code %q, status %d; want InternalError, 500", code, status)
	}

	// Lost response: the SDK gets no answer, yet the object was written.
	setFaults(t, p, Faults{Put: OpFaults{LostResponseRate: 1}})
	lost := aws.String("seg/lost.obj")
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: lost, Body: bytes.NewReader(body[:1000]),
		ContentLength: aws.Int64(1000)}); err == nil {
		t.Fatal("PutObject succeeded with lost response rate 1")
	} else {
		t.Logf("lost response: %v", err)
	}

	// Truncated body: the headers arrive, the body breaks off.
	setFaults(t, p, Faults{Get: OpFaults{TruncateRate: 1}})
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: key})
	if err != nil {
		t.Fatalf("GetObject with truncation: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err == nil || len(got) >= len(body) {
		t.Fatalf("read %d of %d bytes without an error", len(got), len(body))
	}
	t.Logf("truncated read: %d of %d bytes, %v", len(got), len(body), err)

	p.Heal()
	if got := getObject(t, c, bucket, lost, nil); !bytes.Equal(got, body[:1000]) {
		t.Fatal("the PUT whose response was lost did not commit its bytes")
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: throttled}); err == nil {
		t.Fatal("the throttled PUT wrote an object")
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: key}); err != nil {
		t.Fatalf("DeleteObject: %v", err)
	}

	s := p.Stats()
	t.Logf("stats %+v", s)
	for _, k := range []Kind{KindSlowDown, KindInternalError, KindLostResponse, KindTruncate} {
		if s.Injected[k] != 1 {
			t.Errorf("injected %s %d times, want 1", k, s.Injected[k])
		}
	}
	if s.UpstreamErrors != 0 {
		t.Errorf("upstream errors %d", s.UpstreamErrors)
	}
}

func getObject(t *testing.T, c *s3.Client, bucket, key, rng *string) []byte {
	t.Helper()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: bucket, Key: key, Range: rng})
	if err != nil {
		t.Fatalf("GetObject %s: %v", aws.ToString(key), err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("GetObject %s: read: %v", aws.ToString(key), err)
	}
	return b
}
