package outbox

import (
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/store"
)

// EventsPerMessageDefault is how many transfers of one subject a pass
// publishes in one message (events.TaskTransfers) unless Config says
// otherwise: ~20 KB of JSON, far below JetStream's 1 MB message limit.
const EventsPerMessageDefault = 64

// maxMessageBytes bounds a message of several transfers, whatever
// EventsPerMessage allows: a transfer's reason holds up to 2,048
// characters (an error message), and a NATS server refuses a message past
// its max_payload (1 MB by default), which would stall the relay on that
// pass. 64 transfers usually take ~20 KB; a transfer alone may be larger.
// A server that announces a smaller max_payload lowers it (messageBytes).
const maxMessageBytes = 64 << 10

// headerRoom is what a message's headers may take of the server's
// max_payload (a Nats-Msg-Id, a trace context, the event type: a few
// hundred bytes).
const headerRoom = 1 << 10

// messageBytes is the bound on a message of several transfers for a
// server that announced serverMax as its max_payload (0: not known).
func messageBytes(serverMax int64) int {
	if serverMax <= 0 {
		return maxMessageBytes
	}
	return max(0, min(maxMessageBytes, int(serverMax)-headerRoom))
}

// transferGroup gathers the transfers of one subject bound for one
// message, or holds one event that travels alone.
type transferGroup struct {
	subject string
	first   store.OutboxRow
	n       int
	hint    int // the most transfers it may get
	// maxBytes bounds the message's data (messageBytes).
	maxBytes int
	data     []byte
	ids      uint64 // FNV-1a of the event IDs, in order
	// closed: nothing more joins it (a row that travels alone came after
	// it on its subject).
	closed bool
	// eventIDs lists them when keepIDs is set (regroup).
	eventIDs []string
	keepIDs  bool
}

// appendEvents appends to msgs the messages of rows' events. Transfers
// without a trace context that share a subject travel together, up to
// perMessage a message (events.TaskTransfers); a transfer with a trace
// context (its traceparent header is its own), any other event and a
// transfer left alone go as one message each, as before.
//
// Order: messages go out in the order their first row came, and a row
// joins a message only if that keeps both its subject's rows and its
// task's rows in order (a task's RUNNING and SUCCESS transfers are on two
// subjects: the message holding its SUCCESS is stored after the one
// holding its RUNNING). Otherwise it starts a new message. Only around a
// publish tried again, and for a row committed late into a hole (as
// before), can the order differ from history's.
//
// A message of several transfers gets a Nats-Msg-Id made of its first
// event ID, its count and a hash of every event ID in it: the same
// transfers published again are dropped by JetStream as before, while a
// message that differs by one transfer (a row committed late into a hole,
// now read with the others) is stored, never mistaken for the one before.
// So that a pass tried again after a failed publish (NATS restarting, say)
// sends the same messages even when it read more rows this time, the
// transfers of the failed attempt are grouped as they were (retry, from
// regroup; nil for none). A relay that takes over after a crash has no
// such memory: where it groups differently, some transfers are stored
// twice, and a consumer tells them by their event IDs, as it tells any
// repeat past the duplicate window.
func appendEvents(msgs []bus.Msg, rows []store.OutboxRow, perMessage, maxBytes int, retry map[string]int) []bus.Msg {
	return appendGrouped(msgs, rows, perMessage, maxBytes, retry, nil)
}

// appendGrouped is appendEvents, noting in record, when not nil, the
// message of every transfer that travels with others.
func appendGrouped(msgs []bus.Msg, rows []store.OutboxRow, perMessage, maxBytes int, retry, record map[string]int) []bus.Msg {
	if perMessage <= 1 {
		for _, row := range rows {
			msgs = append(msgs, alone(row))
		}
		return msgs
	}
	var (
		seq   []*transferGroup                  // in the order they go out
		open  []int                             // per subject, the place in seq of the message its next row may join
		again map[int]int                       // a retried message's number -> its place in seq
		last  = make(map[string]int, len(rows)) // task -> place of its latest row's message
	)
	start := func(row store.OutboxRow) int {
		seq = append(seq, &transferGroup{subject: row.Subject, hint: min(perMessage, len(rows)), maxBytes: maxBytes, keepIDs: record != nil})
		seq[len(seq)-1].add(row)
		return len(seq) - 1
	}
	for _, row := range rows {
		task := row.CorrelationID
		prev, seen := last[task]
		if k, ok := retry[row.EventID]; ok {
			i, ok := again[k]
			if ok {
				seq[i].add(row)
			} else {
				if again == nil {
					again = make(map[int]int)
				}
				i = start(row)
				again[k] = i
			}
			last[task] = i
			continue
		}
		o := slices.IndexFunc(open, func(p int) bool { return seq[p].subject == row.Subject })
		if row.EventType != events.TypeTaskTransferred || row.TraceParent != "" {
			if o >= 0 { // what came before it on its subject goes first
				seq[open[o]].closed = true
			}
			last[task] = start(row)
			continue
		}
		if o >= 0 && !(seen && prev > open[o]) && seq[open[o]].takes(row, perMessage) {
			seq[open[o]].add(row)
			last[task] = open[o]
			continue
		}
		i := start(row)
		if o >= 0 {
			open[o] = i
		} else {
			open = append(open, i)
		}
		last[task] = i
	}
	groups := 0
	for _, g := range seq {
		if record != nil && g.n > 1 {
			for _, id := range g.eventIDs {
				record[id] = groups
			}
			groups++
		}
		msgs = append(msgs, g.msg())
	}
	return msgs
}

// regroup records how appendEvents groups rows' transfers (given the
// grouping retry it was given), for the next attempt after a failed
// publish: the event ID of every transfer that travels with others, to the
// number of its message.
func regroup(rows []store.OutboxRow, perMessage, maxBytes int, retry map[string]int) map[string]int {
	out := make(map[string]int)
	appendGrouped(nil, rows, perMessage, maxBytes, retry, out)
	return out
}

func (g *transferGroup) add(row store.OutboxRow) {
	if g.n == 0 {
		g.first = row
		g.data = append(make([]byte, 0, min(16+g.hint*(len(row.Payload)+1), g.maxBytes)), `{"transfers":[`...)
		g.ids = fnvOffset
	} else {
		g.data = append(g.data, ',')
	}
	g.data = append(g.data, row.Payload...)
	g.ids = fnvAdd(g.ids, row.EventID)
	if g.keepIDs {
		g.eventIDs = append(g.eventIDs, row.EventID)
	}
	g.n++
}

// takes reports whether row's transfer may join g: g is open, holds
// fewer than perMessage and stays within its maxBytes with it.
func (g *transferGroup) takes(row store.OutboxRow, perMessage int) bool {
	return !g.closed && g.n < perMessage && len(g.data)+len(row.Payload)+len(`,]}`) <= g.maxBytes
}

// msg is the group's message: the transfer alone when it has one.
func (g *transferGroup) msg() bus.Msg {
	if g.n == 1 {
		return alone(g.first)
	}
	id := g.first.EventID + "-" + strconv.Itoa(g.n) + "-" + strconv.FormatUint(g.ids, 16)
	return bus.Msg{Subject: g.subject, ID: id, EventType: events.TypeTaskTransfers, Data: append(g.data, "]}"...)}
}

func alone(row store.OutboxRow) bus.Msg {
	return bus.Msg{
		Subject: row.Subject, ID: row.EventID, EventType: row.EventType,
		CorrelationID: row.CorrelationID, Data: row.Payload, TraceParent: row.TraceParent,
	}
}

// FNV-1a, 64 bits, over the event IDs each followed by a separator, so
// that ("ab","c") and ("a","bc") differ. hash/fnv's offset and prime.
var fnvOffset = fnv.New64a().Sum64()

const fnvPrime = 1099511628211

func fnvAdd(h uint64, id string) uint64 {
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= fnvPrime
	}
	h ^= '|'
	return h * fnvPrime
}
