package timer

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
)

// A lane member names a waiting task. With everything the dispatcher needs
// to hand the task on without reading its row it is
// "<id>:<attempt>:<ready|retrying>:<type>" (type names cannot hold a
// colon); a task whose type or state the indexer did not know is its bare
// ID, and the dispatcher reads it back when it falls due. A task with a
// trace context has it after the type, behind a slash (type names cannot
// hold one either): "<id>:<attempt>:<state>:<type>/<traceparent>", so the
// dispatch the pop sends joins the task's trace without a read. A task's
// trace context never changes, so indexing the same task in the same state
// again finds the same member, and ZADD stays idempotent.

// member is the lane member of r.
func member(r store.DueRef) string {
	id := strconv.FormatInt(r.ID, 10)
	var state string
	switch r.Status {
	case contracts.StatusReady:
		state = "ready"
	case contracts.StatusRetrying:
		state = "retrying"
	}
	if r.Type == "" || state == "" {
		return id
	}
	m := id + ":" + strconv.Itoa(r.Attempt) + ":" + state + ":" + r.Type
	if r.TraceParent != "" {
		m += "/" + r.TraceParent
	}
	return m
}

// parseMember reads a lane member back; Type is empty for a bare ID.
func parseMember(m string) (store.DueRef, error) {
	idPart, rest, lean := strings.Cut(m, ":")
	id, err := strconv.ParseInt(idPart, 10, 64)
	if err != nil || id <= 0 {
		return store.DueRef{}, fmt.Errorf("lane member %q: bad task ID", m)
	}
	if !lean {
		return store.DueRef{ID: id}, nil
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) != 3 || parts[2] == "" {
		return store.DueRef{}, fmt.Errorf("lane member %q: want <id>:<attempt>:<state>:<type>", m)
	}
	attempt, err := strconv.Atoi(parts[0])
	if err != nil || attempt < 0 {
		return store.DueRef{}, fmt.Errorf("lane member %q: bad attempt", m)
	}
	taskType, tp, _ := strings.Cut(parts[2], "/")
	ref := store.DueRef{ID: id, Attempt: attempt, Type: taskType, TraceParent: tp}
	switch parts[1] {
	case "ready":
		ref.Status = contracts.StatusReady
	case "retrying":
		ref.Status = contracts.StatusRetrying
	default:
		return store.DueRef{}, fmt.Errorf("lane member %q: unknown state %q", m, parts[1])
	}
	return ref, nil
}
