package s3_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/s3"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
	"github.com/sluice-mq/sluice/tier/objstore/storetest"
)

func TestMultipartConformance(t *testing.T) {
	srv := s3test.Start(t)
	var n atomic.Int64
	storetest.RunMultipart(t, func(t *testing.T) objstore.Store {
		return newStore(t, srv, fmt.Sprintf("multipart/%d", n.Add(1)), srv.Options())
	})
}

// TestPresignedPartUpload: a client without credentials PUTs parts to the
// presigned URLs; the store lists and completes them.
func TestPresignedPartUpload(t *testing.T) {
	srv := s3test.Start(t)
	st := newStore(t, srv, "presign", srv.Options())
	ctx := t.Context()
	key := "large/t/presigned"
	id, err := st.CreateMultipart(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("0123456789abcdef"), (objstore.MinPartSize+100)/16)
	parts := [][]byte{body[:objstore.MinPartSize], body[objstore.MinPartSize:]}
	for i, p := range parts {
		url, err := st.PresignUploadPart(ctx, key, id, int32(i+1), int64(len(p)), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(p))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("PUT part %d to the presigned URL: %s", i+1, resp.Status)
		}
	}
	listed, err := st.ListParts(ctx, key, id)
	if err != nil || len(listed) != 2 {
		t.Fatalf("ListParts = %+v, %v", listed, err)
	}
	if err := st.CompleteMultipart(ctx, key, id, listed); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, key, 0, -1)
	if err != nil || sha256.Sum256(got) != sha256.Sum256(body) {
		t.Fatalf("completed object: %d bytes, %v", len(got), err)
	}
	if _, err := st.PresignUploadPart(ctx, key, id, 1, 1, 2*s3.MaxPresignExpiry); err == nil {
		t.Fatal("a presigned URL beyond the maximum expiry was made")
	}
}
