package executor

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/services/internal/metrics"
)

// Hops says when an attempt's dispatch passed each hop on its way to the
// handler. A zero time is a hop not known: only a task dispatched the
// moment it became READY (by the submitter or the relay) says when its
// transfer was written and taken up.
type Hops struct {
	// Committed is when the READY transfer was written; Sent when its
	// sender took it up (the relay read it, or the submitter committed it).
	Committed, Sent time.Time
	// Stored is when JetStream stored the dispatch (its clock), Fetched
	// when this executor received it, Claimed when the claim committed.
	Stored, Fetched, Claimed time.Time
}

// hopsOf reads the hops a dispatch carries and its delivery says.
func hopsOf(h *head, claimed time.Time) Hops {
	hp := Hops{Committed: unixNs(h.task.CommittedNs), Sent: unixNs(h.task.SentNs), Fetched: h.fetchedAt, Claimed: claimed}
	if h.msg != nil {
		if md, err := h.msg.Metadata(); err == nil {
			hp.Stored = md.Timestamp
		}
	}
	return hp
}

func unixNs(ns int64) time.Time {
	if ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// hopObservers are ax_task_hop_seconds's series, looked up once.
var hopObservers = func() map[string]prometheus.Observer {
	m := make(map[string]prometheus.Observer, len(metrics.Hops))
	for _, h := range metrics.Hops {
		m[h] = metrics.TaskHopSeconds.WithLabelValues(h)
	}
	return m
}()

// observe records the hops before a handler that started at start.
func (hp *Hops) observe(start time.Time) {
	observeHop(metrics.HopSend, hp.Committed, hp.Sent)
	observeHop(metrics.HopStore, hp.Sent, hp.Stored)
	observeHop(metrics.HopFetch, hp.Stored, hp.Fetched)
	observeHop(metrics.HopClaim, hp.Fetched, hp.Claimed)
	observeHop(metrics.HopStart, hp.Claimed, start)
}

// observeHop records one hop whose ends are both known. The ends may be
// taken on different clocks (MySQL's, another process's, JetStream's):
// a clock ahead reads as 0, not as a negative time.
func observeHop(hop string, from, to time.Time) {
	if from.IsZero() || to.IsZero() {
		return
	}
	hopObservers[hop].Observe(max(to.Sub(from), 0).Seconds())
}
