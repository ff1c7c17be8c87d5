package submitter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/axsched/ax/contracts"
)

// decodeJSON reads one JSON object of at most limit bytes into v, refusing
// unknown fields so a misspelt option is an error rather than ignored.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *contracts.Problem {
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		var syntax *json.SyntaxError
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &tooLarge):
			return &contracts.Problem{Status: http.StatusRequestEntityTooLarge, Code: contracts.CodePayloadTooLarge,
				Detail: fmt.Sprintf("request body exceeds the limit of %d bytes", limit)}
		case errors.As(err, &typeErr) && typeErr.Field == "":
			return &contracts.Problem{Status: http.StatusBadRequest, Code: contracts.CodeInvalidArgument,
				Detail: "request body must be a JSON object"}
		case errors.As(err, &typeErr):
			return &contracts.Problem{Status: http.StatusBadRequest, Code: contracts.CodeInvalidArgument,
				Detail: fmt.Sprintf("field %q must be %s", typeErr.Field, typeErr.Type)}
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return &contracts.Problem{Status: http.StatusBadRequest, Code: contracts.CodeInvalidArgument,
				Detail: strings.TrimPrefix(err.Error(), "json: ")}
		case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return &contracts.Problem{Status: http.StatusBadRequest, Code: contracts.CodeMalformedJSON,
				Detail: "request body is not valid JSON: " + err.Error()}
		default:
			return &contracts.Problem{Status: http.StatusBadRequest, Code: contracts.CodeMalformedJSON,
				Detail: "request body is not valid JSON: " + err.Error()}
		}
	}
	if dec.More() {
		return &contracts.Problem{Status: http.StatusBadRequest, Code: contracts.CodeMalformedJSON,
			Detail: "request body holds more than one JSON value"}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", contracts.ProblemContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(contracts.Problem{
		Type:   "urn:ax:error:" + code,
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Code:   code,
	})
}
