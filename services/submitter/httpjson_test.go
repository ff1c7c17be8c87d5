package submitter

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
)

// discardWriter is a ResponseWriter that keeps nothing but its header.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// bodyWriter is a ResponseWriter that keeps the body too.
type bodyWriter struct {
	discardWriter
	body bytes.Buffer
}

func (w *bodyWriter) Write(p []byte) (int, error) { return w.body.Write(p) }

// TestWriteJSONAsEncodingJSON: answers are byte for byte what
// encoding/json's Encoder writes, on the values that test its edges
// (HTML and line separators in strings and raw payloads, invalid UTF-8,
// times in other zones, floats, maps, nil and empty slices, pointers).
func TestWriteJSONAsEncodingJSON(t *testing.T) {
	at := time.Date(2026, 12, 5, 7, 0, 0, 123456789, time.FixedZone("x", 5400))
	task := contracts.Task{ID: "1", Type: "a.b", Status: contracts.StatusFailed, Priority: contracts.PriorityHigh,
		Payload: []byte(` { "a" : "<b>&\u2028 ", "n": 1.50e3, "x":[ 1, 2 ] } `), Result: []byte(`"<>"`),
		LastError: "<&>   é \x01 \xff", NextRunTime: at, CreatedAt: at.UTC(), Progress: &contracts.TaskProgress{Percent: 12, Message: "<&>", At: at}}
	for _, v := range []any{
		task, contracts.Task{}, []contracts.Task{task, {}}, []contracts.Task(nil), []contracts.Task{},
		contracts.BatchResponse{Results: []contracts.BatchItemResult{{Index: 0, Status: 201, Task: &task},
			{Index: 1, Status: 400, Error: contracts.NewProblem(400, contracts.CodeInvalidArgument, "<bad>")}}},
		map[string]any{"z": 1.0, "a": []float64{1e21, 1e-7, 0.1, -0, 123456789}, "m": map[string]int{"b": 2, "a": 1}, "n": nil},
		struct {
			P *int   `json:"p,omitempty"`
			S string `json:"s,omitempty"`
			I int64  `json:"i,string"`
		}{I: 1 << 60},
	} {
		var want bytes.Buffer
		require.NoError(t, json.NewEncoder(&want).Encode(v))
		w := &bodyWriter{discardWriter: discardWriter{h: http.Header{}}}
		writeJSON(w, http.StatusOK, v)
		require.Equal(t, want.String(), w.body.String())
		require.Equal(t, "application/json", w.h.Get("Content-Type"))
	}
}

// BenchmarkWriteJSONTask measures the answer to one submission.
func BenchmarkWriteJSONTask(b *testing.B) {
	now := time.Now()
	task := contracts.Task{ID: "7345012345678901234", Type: "ax.bench", Status: contracts.StatusReady,
		Priority: contracts.PriorityNormal, Payload: []byte(`{"sleep_ms":1}`), MaxRetries: 3, Timeout: "1m0s",
		NextRunTime: now, CreatedAt: now, UpdatedAt: now}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		writeJSON(w, http.StatusCreated, task)
	}
}

// TestDecodeItemAsDecodeObject: on valid JSON, decodeItem fills the
// submission and words its problems exactly as decodeObject does.
func TestDecodeItemAsDecodeObject(t *testing.T) {
	for _, in := range []string{
		`{"type":"a.b","payload":{"x":[1,{"y":null}]},"priority":"high","max_retries":2,"biz_key":"k","delay":"1s"}`,
		` {"type":"a.b"} `, `{}`, `{"type":"a.b","bogus":1}`, `{"Type":"a","TYPE":"b","tYpe":"c"}`, `{"type":"a","type":"b"}`,
		`{"type":1}`, `{"max_retries":"x"}`, `{"max_retries":1.5}`, `{"max_retries":1e2}`, `{"max_retries":-0}`,
		`{"max_retries":99999999999999999999}`, `{"max_retries":true}`, `{"max_retries":null}`, `{"biz_key":null}`,
		`{"parents":"x"}`, `{"parents":[1]}`, `{"parents":["1",2]}`, `{"parents":[["1"]]}`, `{"parents":{"a":1}}`,
		`{"payload":null}`, `{"payload":"x"}`, `{"payload":[1,2]}`, `{"priority":"\u0068igh","type":"a\u00e9\ud83d\ude00"}`,
		`[1]`, `[]`, `"x"`, `3`, `null`, `true`, `{"timeout":5}`, `{"run_at":{}}`, `{"when":[]}`, `{"TYpe":[]}`,
		`{"type":"\ud800"}`, `{"biz_key":"\udc00x\ud83d"}`, `{"type":"a\u0000b\/"}`, `{"max_retries":1.0}`, `{"max_retries":1E0}`,
		`{"max_retries":-1}`, `{"max_retries":2147483648}`, `{"max_retries":-9223372036854775809}`, `{"payload":{"a":"\ud800"}}`,
	} {
		var a, b contracts.SubmitRequest
		pa, pb := decodeObject([]byte(in), &a, "submission"), decodeItem([]byte(in), &b, "submission")
		require.Equal(t, pa, pb, in)
		if pa == nil {
			require.Equal(t, a, b, in)
		}
	}
}

// sameDecoding checks that decodeSubmission fills a T from in, or refuses
// it, exactly as decodeObject does.
func sameDecoding[T any](t *testing.T, in string) {
	t.Helper()
	var a, b T
	pa, pb := decodeObject([]byte(in), &a, "request body"), decodeSubmission([]byte(in), &b)
	require.Equal(t, pa, pb, in)
	if pa == nil {
		require.Equal(t, a, b, in)
	}
}

// TestDecodeWorkflowAsDecodeObject: a workflow body, with its steps'
// embedded task fields and nested compensations, decodes and is refused
// exactly as decodeObject does it.
func TestDecodeWorkflowAsDecodeObject(t *testing.T) {
	for _, in := range []string{
		`{"name":"order","biz_key":"o-1","steps":[{"key":"a","type":"x.charge","payload":{"n":1},"max_retries":2,"timeout":"5s"},
			{"key":"b","type":"x.sms","depends_on":["a"],"when":"failure","compensate":{"type":"x.undo","payload":[1],"delay":"1s"}}]}`,
		`{"name":"w","steps":[]}`, `{"name":"w","steps":null}`, `{"name":"w","steps":{}}`, `{"name":"w","steps":[1]}`,
		`{"name":"w","steps":[{"key":"a","bogus":1}]}`, `{"name":"w","steps":[{"key":"a","compensate":{"key":"b"}}]}`,
		`{"name":"w","steps":[{"KEY":"a","Type":"t","DEPENDS_ON":["x"]}]}`, `{"name":"w","steps":[{"key":"a","depends_on":"a"}]}`,
		`{"name":"w","steps":[{"key":"a","max_retries":1.5}]}`, `{"name":"w","steps":[{"key":"a","compensate":"x"}]}`,
		`{"name":"w","steps":[{"key":"a","compensate":null,"payload":null}]}`, `{"name":1}`, `{"nom":"w"}`, `[]`, `null`, `"w"`,
		`{"name":"\ud800","steps":[{"key":"\u00e9","type":"a\u0000b"}]}`, `{"name":"w","name":"v"}`,
	} {
		sameDecoding[contracts.WorkflowRequest](t, in)
	}
}

// FuzzDecodeWorkflow compares decodeSubmission with decodeObject on any
// UTF-8 workflow body.
func FuzzDecodeWorkflow(f *testing.F) {
	f.Add(`{"name":"w","steps":[{"key":"a","type":"t","compensate":{"type":"u"}},{"key":"b","depends_on":["a"]}]}`)
	f.Add(`{"name":"w","steps":[{"key":"a","compensate":{"key":"b"}}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		if !utf8.ValidString(in) {
			return // readBody refuses it first
		}
		sameDecoding[contracts.WorkflowRequest](t, in)
	})
}

// BenchmarkDecodeItem measures decoding one item of a batch.
func BenchmarkDecodeItem(b *testing.B) {
	item := []byte(`{"type":"ax.bench","payload":{"sleep_ms":1,"fail":false},"priority":"normal"}`)
	for _, bc := range []struct {
		name   string
		decode func([]byte, any, string) *contracts.Problem
	}{{"encoding_json", decodeObject}, {"segmentio", func(data []byte, v any, what string) *contracts.Problem {
		return decodeItem(data, v.(*contracts.SubmitRequest), what)
	}}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var req contracts.SubmitRequest
				if p := bc.decode(item, &req, "submission"); p != nil {
					b.Fatal(p.Detail)
				}
			}
		})
	}
}

// FuzzDecodeItem compares decodeItem with decodeObject on any valid JSON.
func FuzzDecodeItem(f *testing.F) {
	f.Add(`{"type":"a.b","payload":{"x":1},"max_retries":2,"parents":["1"]}`)
	f.Add(`{"parents":[1]}`)
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		var a, b contracts.SubmitRequest
		pa, pb := decodeObject([]byte(in), &a, "submission"), decodeItem([]byte(in), &b, "submission")
		require.Equal(t, pa, pb, in)
		if pa == nil {
			require.Equal(t, a, b, in)
		}
	})
}

// FuzzDecodeSubmission compares decodeSubmission with decodeObject on any
// UTF-8 body, JSON or not.
func FuzzDecodeSubmission(f *testing.F) {
	f.Add(`{"type":"a.b","payload":{"x":1},"max_retries":2,"parents":["1"]}`)
	f.Add(`{"type":"a.b"} {"type":"c"}`)
	f.Add(`{"type":"a.b","payload":{"x":1,}}`)
	f.Add(`{"TYpe":[]}`)
	f.Fuzz(func(t *testing.T, in string) {
		if !utf8.ValidString(in) {
			return // decodeJSON refuses it first
		}
		sameDecoding[contracts.SubmitRequest](t, in)
	})
}

// BenchmarkDecodeSubmission measures decoding the body of one submission.
func BenchmarkDecodeSubmission(b *testing.B) {
	body := []byte(`{"type":"ax.bench","payload":{"sleep_ms":1,"fail":false},"priority":"normal"}`)
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req contracts.SubmitRequest
			if p := decodeObject(body, &req, "request body"); p != nil {
				b.Fatal(p.Detail)
			}
		}
	})
	b.Run("valid_then_segmentio", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req contracts.SubmitRequest
			if p := decodeSubmission(body, &req); p != nil {
				b.Fatal(p.Detail)
			}
		}
	})
}
