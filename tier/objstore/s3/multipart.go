package s3

// multipart.go owns the S3 store's multipart uploads and presigned part
// URLs (objstore.Multipart, objstore.Presigner).
//
// Invariant: UploadPart streams its body: it is sent with an unsigned
// payload (no SHA-256 of the body before sending, which would need to read
// it twice) and no request checksum, so the SDK neither buffers nor seeks
// it; it is therefore tried once (a caller retries a part whole, from its
// own source). Every other call retries as the store's others do.
// Invariant: service errors map onto objstore's: NoSuchUpload to
// ErrNoUpload, InvalidPart/InvalidPartOrder/EntityTooSmall to ErrInvalidPart.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/sluice-mq/sluice/tier/objstore"
)

var (
	_ objstore.Multipart = (*Store)(nil)
	_ objstore.Presigner = (*Store)(nil)
)

// MaxPresignExpiry bounds a presigned URL's life.
const MaxPresignExpiry = time.Hour

// CreateMultipart implements objstore.Multipart.
func (s *Store) CreateMultipart(ctx context.Context, key string) (string, error) {
	ctx, cancel, err := s.begin(ctx, "create multipart", key)
	if err != nil {
		return "", err
	}
	defer cancel()
	out, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if err != nil {
		return "", wrapMultipart("create multipart", key, err)
	}
	return aws.ToString(out.UploadId), nil
}

// countingReader counts what was read of a part's body.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// UploadPart implements objstore.Multipart. It is not retried (see the file
// comment) and runs under the store's timeout.
func (s *Store) UploadPart(ctx context.Context, key, id string, number int32, body io.Reader, size int64) (string, error) {
	ctx, cancel, err := s.begin(ctx, "upload part", key)
	if err != nil {
		return "", err
	}
	defer cancel()
	if number < 1 || number > objstore.MaxParts || size < 0 || size > objstore.MaxPartSize {
		return "", fmt.Errorf("s3: upload part %d of %q (%d bytes): %w", number, key, size, objstore.ErrInvalidPart)
	}
	cr := &countingReader{r: io.LimitReader(body, size)}
	out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key), UploadId: aws.String(id),
		PartNumber: aws.Int32(number), Body: cr, ContentLength: aws.Int64(size),
	}, s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware), func(o *s3.Options) {
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.RetryMaxAttempts = 1
	})
	if err != nil {
		return "", wrapMultipart(fmt.Sprintf("upload part %d of", number), key, err)
	}
	if cr.n != size {
		return "", fmt.Errorf("s3: upload part %d of %q: body gave %d of %d bytes: %w", number, key, cr.n, size, io.ErrUnexpectedEOF)
	}
	return aws.ToString(out.ETag), nil
}

// ListParts implements objstore.Multipart.
func (s *Store) ListParts(ctx context.Context, key, id string) ([]objstore.Part, error) {
	if err := objstore.ValidKey(key); err != nil {
		return nil, fmt.Errorf("s3: list parts: %w", err)
	}
	pages := s3.NewListPartsPaginator(s.client, &s3.ListPartsInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key), UploadId: aws.String(id)})
	var out []objstore.Part
	for pages.HasMorePages() {
		pctx, cancel := context.WithTimeout(ctx, s.timeout)
		page, err := pages.NextPage(pctx)
		cancel()
		if err != nil {
			return nil, wrapMultipart("list parts of", key, err)
		}
		for _, p := range page.Parts {
			out = append(out, objstore.Part{Number: aws.ToInt32(p.PartNumber), ETag: aws.ToString(p.ETag), Size: aws.ToInt64(p.Size)})
		}
	}
	return out, nil
}

// CompleteMultipart implements objstore.Multipart.
func (s *Store) CompleteMultipart(ctx context.Context, key, id string, parts []objstore.Part) error {
	ctx, cancel, err := s.begin(ctx, "complete multipart", key)
	if err != nil {
		return err
	}
	defer cancel()
	cp := make([]types.CompletedPart, len(parts))
	for i, p := range parts {
		cp[i] = types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: aws.String(p.ETag)}
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key), UploadId: aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: cp},
	})
	if err != nil {
		return wrapMultipart("complete multipart", key, err)
	}
	return nil
}

// AbortMultipart implements objstore.Multipart.
func (s *Store) AbortMultipart(ctx context.Context, key, id string) error {
	ctx, cancel, err := s.begin(ctx, "abort multipart", key)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key), UploadId: aws.String(id)})
	if err != nil {
		if err := wrapMultipart("abort multipart", key, err); !errors.Is(err, objstore.ErrNoUpload) {
			return err
		}
	}
	return nil
}

// PresignUploadPart implements objstore.Presigner: a PUT URL for one part,
// valid for expires (at most MaxPresignExpiry).
func (s *Store) PresignUploadPart(ctx context.Context, key, id string, number int32, size int64, expires time.Duration) (string, error) {
	if err := objstore.ValidKey(key); err != nil {
		return "", fmt.Errorf("s3: presign part: %w", err)
	}
	if expires <= 0 || expires > MaxPresignExpiry {
		return "", fmt.Errorf("s3: presign part %d of %q: expiry %v outside (0, %v]", number, key, expires, MaxPresignExpiry)
	}
	in := &s3.UploadPartInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key),
		UploadId: aws.String(id), PartNumber: aws.Int32(number)}
	if size > 0 {
		in.ContentLength = aws.Int64(size)
	}
	req, err := s3.NewPresignClient(s.client).PresignUploadPart(ctx, in, s3.WithPresignExpires(expires))
	if err != nil {
		return "", fmt.Errorf("s3: presign part %d of %q: %w", number, key, err)
	}
	return req.URL, nil
}

// wrapMultipart names the operation and key and maps the service's codes.
func wrapMultipart(op, key string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchUpload":
			return fmt.Errorf("s3: %s %q: %w: %w", op, key, objstore.ErrNoUpload, err)
		case "InvalidPart", "InvalidPartOrder", "EntityTooSmall":
			return fmt.Errorf("s3: %s %q: %w: %w", op, key, objstore.ErrInvalidPart, err)
		}
	}
	return fmt.Errorf("s3: %s %q: %w", op, key, err)
}
