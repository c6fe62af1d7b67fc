package apierr

// This file owns the decoding of a JSON request body and the answer to a
// body that does not decode, shared by httpapi and objapi so that every
// route refuses bad JSON in the same words.
//
// Invariant: a decoding failure is an *Error (400, or 413 for a body over
// its bound) whose message names the JSON field and the JSON it expected,
// never a Go type or struct name.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
)

// Decode reads one JSON object from body into v, refusing unknown fields
// and data after the object. limit is the bound the caller put on body
// (http.MaxBytesReader), named when the body exceeds it.
func Decode(body io.Reader, v any, limit int64) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return DecodeError(err, limit)
	}
	if _, err := dec.Token(); err != io.EOF {
		return BadRequest("malformed JSON: data after the request object")
	}
	return nil
}

// DecodeError turns a failure to read or decode a body bounded by limit
// into an Error written for a person.
func DecodeError(err error, limit int64) *Error {
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		return Errorf(http.StatusRequestEntityTooLarge, "too_large", "request body exceeds %d bytes", limit)
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return BadRequest("the body must be %s, not a JSON %s", jsonKind(typeErr.Type), typeErr.Value)
		}
		return BadRequest("field %s: expected %s, got a JSON %s", typeErr.Field, jsonKind(typeErr.Type), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return BadRequest("malformed JSON at byte %d: %s", syntaxErr.Offset, syntaxErr.Error())
	case errors.Is(err, io.EOF):
		return BadRequest("the request body is empty; this call takes a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest("malformed JSON: the body ends inside a value")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return BadRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return BadRequest("malformed JSON: %v", err)
}

// jsonKind names a Go type as the JSON it is decoded from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("an integer (%s)", integerRange(t))
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

// integerRange is the range of an integer type, for messages.
func integerRange(t reflect.Type) string {
	bits := t.Bits()
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		return fmt.Sprintf("0 to %d", uint64(1)<<bits-1)
	}
	return fmt.Sprintf("%d to %d", -(int64(1) << (bits - 1)), int64(1)<<(bits-1)-1)
}
