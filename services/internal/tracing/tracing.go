// Package tracing follows one task across the services with OpenTelemetry.
//
// A task's trace context is a W3C `traceparent` string: taken from the
// submit request (or started there), stored with the task
// (tasks.trace_parent, task_history.trace_parent) and carried in a
// `traceparent` header on every NATS message about the task. Each service
// starts its spans as children of the context it was handed, so one trace
// per task spans every service that touched it.
//
// Tracing is off unless an OTLP endpoint is set. Off, the global tracer
// provider is OpenTelemetry's no-op and Enabled is false: the hot paths
// check Enabled (one atomic load) and build no span and no attribute. A
// trace context a caller sent is still stored and passed on, so a handler
// sees its caller's trace even when ax exports nothing of its own.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Header is the W3C trace context header and the submit request's field.
const Header = "traceparent"

// ScopeName is the instrumentation scope of ax's spans.
const ScopeName = "github.com/axsched/ax"

// Config says where spans go.
type Config struct {
	// Endpoint is the OTLP/HTTP collector's base URL (http://host:4318);
	// "/v1/traces" is added when it names no path. Empty leaves tracing
	// off unless OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
	Endpoint string
	// Service is the resource's service.name (ax-submitter, ...).
	Service string
	// Node is this process's node name (ax.node on the resource).
	Node string
}

var enabled atomic.Bool

// Enabled reports whether spans are exported. Hot paths check it before
// building a span.
func Enabled() bool { return enabled.Load() }

// propagator reads and writes traceparent (and tracestate) headers.
var propagator = propagation.TraceContext{}

// Setup installs the OTLP exporter as the global tracer provider when an
// endpoint is configured, and returns the function that flushes and stops
// it. Without an endpoint it changes nothing and returns a no-op.
func Setup(ctx context.Context, cfg Config, logger *slog.Logger) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagator)
	endpoint := cfg.Endpoint
	envSet := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if endpoint == "" && !envSet {
		return func(context.Context) error { return nil }, nil
	}
	var opts []otlptracehttp.Option
	if endpoint != "" {
		u, err := endpointURL(endpoint)
		if err != nil {
			return nil, err
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", cfg.Service), attribute.String("ax.node", cfg.Node)))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	// The batcher reads OTEL_BSP_* (schedule delay, queue size) and the
	// sampler OTEL_TRACES_SAMPLER(_ARG); the default samples every trace
	// whose parent is sampled, and every new one.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	enabled.Store(true)
	logger.Info("tracing on", "exporter", "otlp/http", "endpoint", cmpOr(endpoint, "from OTEL_EXPORTER_OTLP_*"), "service", cfg.Service)
	return func(ctx context.Context) error {
		enabled.Store(false)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return errors.Join(tp.ForceFlush(ctx), tp.Shutdown(ctx))
	}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// endpointURL is a collector base URL with the traces path added when it
// names none, as OTEL_EXPORTER_OTLP_ENDPOINT is read.
func endpointURL(endpoint string) (string, error) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("otlp endpoint %q: want a URL such as http://localhost:4318", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// Tracer is ax's tracer on the global provider.
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// Parse reads a traceparent; ok is false for an empty or malformed one.
func Parse(tp string) (trace.SpanContext, bool) {
	if tp == "" {
		return trace.SpanContext{}, false
	}
	sc := trace.SpanContextFromContext(propagator.Extract(context.Background(), headerCarrier(tp)))
	return sc, sc.IsValid()
}

// Format writes sc as a traceparent; empty for an invalid one.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c[Header]
}

// Valid reports whether tp is a well-formed traceparent.
func Valid(tp string) bool {
	_, ok := Parse(tp)
	return ok
}

// headerCarrier is a carrier holding one traceparent.
type headerCarrier string

func (h headerCarrier) Get(key string) string {
	if key == Header {
		return string(h)
	}
	return ""
}
func (headerCarrier) Set(string, string) {}
func (headerCarrier) Keys() []string     { return []string{Header} }

// WithParent returns ctx carrying tp as its remote parent, unless ctx
// already has a span of the same trace (a more precise parent) or tp is
// not a valid traceparent.
func WithParent(ctx context.Context, tp string) context.Context {
	sc, ok := Parse(tp)
	if !ok {
		return ctx
	}
	if cur := trace.SpanContextFromContext(ctx); cur.IsValid() && cur.TraceID() == sc.TraceID() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Start starts a span named name under tp (see WithParent). Without a
// valid tp (and no span in ctx) it starts a new trace. When tracing is off the span is OpenTelemetry's
// no-op, carrying tp's context, so Current still passes tp on.
func Start(ctx context.Context, tp, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx = WithParent(ctx, tp)
	return Tracer().Start(ctx, name, opts...)
}

// Current is the traceparent of ctx's span: what to pass on to the next
// hop; empty when ctx has none.
func Current(ctx context.Context) string {
	return Format(trace.SpanContextFromContext(ctx))
}

// Child records a span named name under tp that starts and ends now (a
// hand-off: a dispatch, an indexing) and returns the traceparent to pass
// on: the new span's when tracing is on, tp itself when off.
func Child(tp, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) string {
	if !Enabled() || tp == "" {
		return tp
	}
	return mark(tp, name, kind, attrs)
}

// Root records a span named name that starts a new trace and ends now, and
// returns its traceparent; empty when tracing is off.
func Root(name string, kind trace.SpanKind, attrs ...attribute.KeyValue) string {
	if !Enabled() {
		return ""
	}
	return mark("", name, kind, attrs)
}

func mark(tp, name string, kind trace.SpanKind, attrs []attribute.KeyValue) string {
	ctx, span := Start(context.Background(), tp, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	span.End()
	if out := Current(ctx); out != "" {
		return out
	}
	return tp
}

// TaskAttrs are the attributes naming a task on every span about it.
func TaskAttrs(id int64, taskType string) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("ax.task.id", strconv.FormatInt(id, 10)), attribute.String("ax.task.type", taskType)}
}
