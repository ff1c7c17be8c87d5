package submitter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	segjson "github.com/segmentio/encoding/json"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/httpedge"
)

// decodeJSON reads one JSON object of at most limit bytes into v, refusing
// unknown fields so a misspelt option is an error rather than ignored.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *contracts.Problem {
	data, p := readBody(w, r, limit)
	if p != nil {
		return p
	}
	return decodeObject(data, v, "request body")
}

// readBody reads a request body of at most limit bytes. It must be UTF-8,
// as JSON text must: a payload is stored as sent and served back, so an
// invalid byte would make every later answer invalid.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *contracts.Problem) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, contracts.NewProblem(http.StatusRequestEntityTooLarge, contracts.CodePayloadTooLarge,
			fmt.Sprintf("request body exceeds the limit of %d bytes", limit))
	case err != nil:
		return nil, contracts.NewProblem(http.StatusBadRequest, contracts.CodeMalformedJSON, "request body cannot be read: "+err.Error())
	case !utf8.Valid(data):
		return nil, contracts.NewProblem(http.StatusBadRequest, contracts.CodeMalformedJSON,
			fmt.Sprintf("request body is not valid UTF-8 (at byte %d): JSON text must be UTF-8", invalidUTF8At(data)))
	}
	return data, nil
}

// decodeSubmission is decodeObject for the body of a single submission
// or a workflow, which every task or workflow submitted alone pays: a body
// that is one valid JSON value (json.Valid only scans, allocating nothing)
// goes to decodeItem's faster parser, anything else to decodeObject, which
// words the syntax error.
func decodeSubmission[T any](data []byte, v *T) *contracts.Problem {
	if !json.Valid(data) {
		return decodeObject(data, v, "request body")
	}
	return decodeItem(data, v, "request body")
}

// decodeObject decodes data, which must be one JSON object, into v; what
// names data in the problem's detail. A body that is JSON but not an
// acceptable object is invalid_argument; anything else is malformed_json.
func decodeObject(data []byte, v any, what string) *contracts.Problem {
	bad := func(code, detail string) *contracts.Problem {
		return contracts.NewProblem(http.StatusBadRequest, code, detail)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil && dec.More():
		return bad(contracts.CodeMalformedJSON, what+" holds more than one JSON value")
	case err == nil && !startsObject(data):
		// null decodes into a struct without error and changes nothing.
		return bad(contracts.CodeInvalidArgument, what+" must be a JSON object")
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return bad(contracts.CodeInvalidArgument, what+" must be a JSON object")
	case errors.As(err, &typeErr):
		return bad(contracts.CodeInvalidArgument, fmt.Sprintf("field %q must be %s", typeErr.Field, jsonKind(typeErr.Type)))
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return bad(contracts.CodeInvalidArgument, strings.TrimPrefix(err.Error(), "json: "))
	default:
		return bad(contracts.CodeMalformedJSON, what+" is not valid JSON: "+err.Error())
	}
}

// decodeItem is decodeObject for one submission of a batch, data being
// one valid JSON value (the batch's body parsed). It decodes with
// segmentio's parser, about six times as fast as encoding/json's Decoder
// with under a third of the allocations, which a batch of a thousand
// items pays a thousand times. An item it refuses, which is rare, is
// decoded again by decodeObject, so its problem is worded exactly as for
// a single submission (the two packages name fields differently in their
// errors).
func decodeItem[T any](data []byte, v *T, what string) *contracts.Problem {
	if _, err := segjson.Parse(data, v, segjson.DisallowUnknownFields); err == nil && startsObject(data) {
		return nil
	}
	var zero T
	*v = zero
	return decodeObject(data, v, what)
}

// startsObject reports whether the JSON value in data is an object.
func startsObject(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '{'
}

// invalidUTF8At is the offset of the first byte of data that is not UTF-8.
func invalidUTF8At(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(data)
}

// jsonKind names the JSON value a Go type accepts, so that a problem speaks
// of the wire format rather than of ax's Go types.
func jsonKind(t reflect.Type) string {
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
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	default:
		return "a different JSON value"
	}
}

// writeJSON answers with v as JSON. The encoder is segmentio's, as for
// events: the same bytes as encoding/json's (HTML escaped, map keys sorted,
// raw messages compacted), for about half the CPU and a fifth of the
// allocations, and every submission is answered with one.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = segjson.NewEncoder(w).Encode(v)
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	httpedge.WriteProblem(w, contracts.NewProblem(status, code, detail))
}
