// Package otlpsink is a minimal OTLP/HTTP trace collector: it decodes the
// protobuf export requests an OpenTelemetry exporter POSTs to /v1/traces,
// counts their spans and, when asked, keeps them. The multi-process tests
// assert on the spans the services export; the bench harness counts them
// while it measures what exporting costs.
package otlpsink

import (
	"compress/gzip"
	"io"
	"net/http"
	"sync"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Sink receives spans. The zero value counts them and keeps none.
type Sink struct {
	// Keep makes the sink keep every span it receives (Spans).
	Keep bool

	mu    sync.Mutex
	count int
	kept  []*tracepb.ResourceSpans
}

// ServeHTTP accepts one OTLP/HTTP protobuf export request, gzipped or not.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(data, &req)
	}
	if err != nil {
		http.Error(w, "not an OTLP trace export: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.count += len(ss.Spans)
		}
	}
	if s.Keep {
		s.kept = append(s.kept, req.ResourceSpans...)
	}
	s.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Count is how many spans arrived.
func (s *Sink) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// Spans are the spans kept so far, as exported (resource, scope, spans).
func (s *Sink) Spans() []*tracepb.ResourceSpans {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*tracepb.ResourceSpans(nil), s.kept...)
}
