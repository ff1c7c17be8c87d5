package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Typed adapts a function taking a decoded payload to Handler, so business
// code declares its payload as a Go type instead of parsing JSON itself.
//
// The payload is decoded strictly: an unknown field, a value of the wrong
// type or trailing data fails the task with a Permanent error, because
// retrying cannot fix a malformed payload, and a field the submitter
// misspelled should fail loudly rather than arrive as its zero value. An
// empty or null payload decodes to T's zero value.
func Typed[T any](fn func(ctx context.Context, t *Task, payload T) error) Handler {
	if fn == nil {
		panic("executor: Typed: nil function")
	}
	return HandlerFunc(func(ctx context.Context, t *Task) error {
		var payload T
		if err := decodeStrict(t.Payload, &payload); err != nil {
			return Permanent(fmt.Errorf("decode %T payload of task %d: %w", payload, t.ID, err))
		}
		return fn(ctx, t, payload)
	})
}

// decodeStrict decodes exactly one JSON value from data into v, refusing
// unknown fields. Empty data leaves v untouched.
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// Decode stops after the first value; anything after it means the
	// payload is not the single value it claims to be.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}
