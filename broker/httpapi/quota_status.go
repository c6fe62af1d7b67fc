package httpapi

// This file owns the HTTP answers of quota and disk-ladder refusals:
//
//	count quota (topics, partitions)        403 quota_exceeded
//	storage quota                           507 quota_exceeded
//	disk ladder (first or third watermark)  507 disk_watermark
//	controller_mutation_rate                429 throttling_quota_exceeded,
//	                                        with Retry-After in seconds

import (
	"errors"
	"net/http"

	"github.com/sluice-mq/sluice/broker/node"
)

// quotaStatus maps a quota refusal to its API error; nil for other errors.
func quotaStatus(err error) *APIError {
	var te *node.ThrottleError
	var st int
	var code string
	switch {
	case errors.As(err, &te):
		st, code = http.StatusTooManyRequests, "throttling_quota_exceeded"
	case errors.Is(err, node.ErrCountQuota):
		st, code = http.StatusForbidden, "quota_exceeded"
	case errors.Is(err, node.ErrStorageQuota):
		st, code = http.StatusInsufficientStorage, "quota_exceeded"
	case errors.Is(err, node.ErrDiskWatermark), errors.Is(err, node.ErrDiskOverQuota):
		st, code = http.StatusInsufficientStorage, "disk_watermark"
	default:
		return nil
	}
	return &APIError{Status: st, Code: code, Message: err.Error()}
}
