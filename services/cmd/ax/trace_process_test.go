package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/otlpsink"
	"github.com/axsched/ax/services/internal/testenv"
)

// span is one received span, flattened for assertions.
type span struct {
	service, name      string
	traceID            string
	spanID, parentID   string
	attrs              map[string]string
	startNano, endNano uint64
}

// received flattens the spans sink kept.
func received(sink *otlpsink.Sink) []span {
	var out []span
	for _, rs := range sink.Spans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				out = append(out, flatten(service, s))
			}
		}
	}
	return out
}

func flatten(service string, s *tracepb.Span) span {
	attrs := map[string]string{}
	for _, kv := range s.Attributes {
		v := kv.Value
		switch {
		case v.GetStringValue() != "":
			attrs[kv.Key] = v.GetStringValue()
		default:
			attrs[kv.Key] = strconv.FormatInt(v.GetIntValue(), 10)
		}
	}
	return span{service: service, name: s.Name, traceID: hex.EncodeToString(s.TraceId),
		spanID: hex.EncodeToString(s.SpanId), parentID: hex.EncodeToString(s.ParentSpanId), attrs: attrs,
		startNano: s.StartTimeUnixNano, endNano: s.EndTimeUnixNano}
}

// traceOf returns the spans of one trace that sink received.
func traceOf(sink *otlpsink.Sink, traceID string) []span {
	var out []span
	for _, s := range received(sink) {
		if s.traceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

func find(spans []span, service, name string, attr ...string) *span {
	for i, s := range spans {
		if s.service != service || s.name != name {
			continue
		}
		ok := true
		for j := 0; j+1 < len(attr); j += 2 {
			ok = ok && s.attrs[attr[j]] == attr[j+1]
		}
		if ok {
			return &spans[i]
		}
	}
	return nil
}

// TestOneTracePerTaskAcrossFiveServices follows tasks whose executor died
// before they fell due: the submitter accepts them (ax.submit), the timer
// indexes and dispatches them to the dead executor's subject, the reaper
// moves that stranded work back (ax.move), the dispatcher routes it anew,
// and another executor claims and runs it (ax.transfer, ax.run). Every one
// of the five processes exports spans to the receiver, and each task's
// spans form one trace of its own that holds all five services — one of
// them under the caller's trace, sent as the submission's traceparent.
func TestOneTracePerTaskAcrossFiveServices(t *testing.T) {
	c := newCluster(t)
	recv := &otlpsink.Sink{Keep: true}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	// Spans leave each process within 100 ms, so a SIGKILL loses little.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	tr := []string{"--otlp-endpoint", srv.URL, "--heartbeat-interval", "2s"}
	c.service(t, "submitter", "sub-1", tr...)
	c.service(t, "timer", "timer-1", tr...)
	c.service(t, "dispatcher", "disp-1", tr...)
	c.service(t, "reaper", "reaper-1", append([]string{"--reap-interval", "500ms"}, tr...)...)
	// The only executor of ax.noop owns every shard, then dies: what the
	// timer dispatches next goes to its subject and is stranded there.
	c.service(t, "executor", "exec-a", tr...).kill9(t)

	const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	var ids []int64
	for i := range 3 {
		req := contracts.SubmitRequest{Type: "ax.noop", Delay: "1s"}
		if i == 0 {
			req.TraceParent = caller
		}
		task, err := c.api.Submit(context.Background(), req)
		require.NoError(t, err)
		id, err := strconv.ParseInt(task.ID, 10, 64)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	traces := map[int64]string{}
	for _, id := range ids {
		var tp string
		require.NoError(t, c.db.QueryRow(`SELECT trace_parent FROM tasks WHERE id = ?`, id).Scan(&tp))
		require.Len(t, tp, 55, "task %d stored its trace context", id)
		traces[id] = tp[3:35]
	}
	require.Equal(t, caller[3:35], traces[ids[0]], "the caller's trace is the task's")
	got, err := c.api.Get(context.Background(), strconv.FormatInt(ids[1], 10))
	require.NoError(t, err)
	require.Equal(t, traces[ids[1]], got.TraceID, "the API names the task's trace")
	require.Len(t, map[string]bool{traces[ids[0]]: true, traces[ids[1]]: true, traces[ids[2]]: true}, 3, "one trace per task")

	testenv.Eventually(t, 60*time.Second, "the dispatcher re-routed every moved task", func() bool {
		for _, id := range ids {
			if find(traceOf(recv, traces[id]), "ax-dispatcher", "ax.dispatch", "ax.dispatch.by", "dispatcher") == nil {
				return false
			}
		}
		return true
	})
	c.service(t, "executor", "exec-b", tr...)
	testenv.Eventually(t, 60*time.Second, "all tasks SUCCESS", func() bool {
		return c.count(t, "status = 'SUCCESS'") == len(ids)
	})
	// Each process exports on its own schedule: wait until every span of
	// the runs' ancestry has arrived.
	testenv.Eventually(t, 30*time.Second, "the success transfers and the runs' ancestors exported", func() bool {
		for _, id := range ids {
			spans := traceOf(recv, traces[id])
			run := find(spans, "ax-executor", "ax.run")
			if find(spans, "ax-executor", "ax.transfer", "ax.to", "SUCCESS") == nil || run == nil ||
				!slices.Contains(ancestry(spans, run), "ax-submitter ax.submit") {
				return false
			}
		}
		return true
	})

	for _, id := range ids {
		spans := traceOf(recv, traces[id])
		services := map[string]bool{}
		for _, s := range spans {
			services[s.service] = true
			require.Equal(t, strconv.FormatInt(id, 10), s.attrs["ax.task.id"], "span %s of %s names its task", s.name, s.service)
		}
		for _, svc := range []string{"ax-submitter", "ax-timer", "ax-dispatcher", "ax-executor", "ax-reaper"} {
			require.True(t, services[svc], "task %d: no span from %s in %v", id, svc, services)
		}
		submit := find(spans, "ax-submitter", "ax.submit")
		require.NotNil(t, submit, "task %d: submit span", id)
		if id == ids[0] {
			require.Equal(t, caller[36:52], submit.parentID, "the submit span is a child of the caller's")
		} else {
			require.Empty(t, submit.parentID, "a task submitted without a trace starts its own")
		}
		require.NotNil(t, find(spans, "ax-timer", "ax.timer.index"), "task %d", id)
		run := find(spans, "ax-executor", "ax.run")
		require.NotNil(t, run, "task %d: run span", id)
		// The run descends, hop by hop, from every hand-off that brought
		// the task to it: the dispatcher's dispatch, the reaper's move of
		// the timer's dispatch to the dead executor (maybe more than once:
		// until the dispatchers see exec-a dead they route to it again), and
		// the submit span.
		require.Equal(t, []string{"ax-dispatcher ax.dispatch", "ax-reaper ax.move", "ax-timer ax.dispatch", "ax-submitter ax.submit"},
			ancestry(spans, run), "task %d: the run's ancestors", id)
		require.NotNil(t, find(spans, "ax-executor", "ax.transfer", "ax.from", "READY", "ax.to", "RUNNING"), "task %d: claim", id)
		require.NotNil(t, find(spans, "ax-submitter", "ax.transfer", "ax.to", "READY"), "task %d: first READY", id)
		t.Logf("task %d: %d spans from %d services in trace %s", id, len(spans), len(services), traces[id])
	}
	logTrace(t, traceOf(recv, traces[ids[1]]))
}

// ancestry names the ancestors of s from its parent up, each distinct
// service and span name once, in order (repeated hand-offs fold into one).
func ancestry(spans []span, s *span) []string {
	byID := map[string]*span{}
	for i := range spans {
		byID[spans[i].spanID] = &spans[i]
	}
	var out []string
	for p := byID[s.parentID]; p != nil; p = byID[p.parentID] {
		name := p.service + " " + p.name
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// logTrace prints one trace's spans in time order, for the docs.
func logTrace(t *testing.T, spans []span) {
	var b bytes.Buffer
	for range spans {
		first := 0
		for i := range spans {
			if spans[i].startNano < spans[first].startNano {
				first = i
			}
		}
		s := spans[first]
		fmt.Fprintf(&b, "%-14s %-15s %s->%s %s\n", s.service, s.name, s.attrs["ax.from"], s.attrs["ax.to"], s.attrs["ax.dispatch.by"])
		spans = append(spans[:first], spans[first+1:]...)
	}
	t.Logf("one task's trace:\n%s", b.String())
}
