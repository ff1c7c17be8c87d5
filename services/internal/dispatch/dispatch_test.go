package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestDispatchesForOneSubjectShareMessages: the dispatches of one send
// bound for one subject go together, at most dispatch.MaxBatch a message;
// a task alone on its subject, and a task with a trace context, keep a
// message of their own; every task is in exactly one message, on its
// lane's subject.
func TestDispatchesForOneSubjectShareMessages(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	send := dispatch.New(dispatch.Config{Heartbeat: time.Second}, st, rdb, k, clock.System{}, testenv.Logger(t))

	var tasks []dispatch.Task
	add := func(id int64, taskType string, lane contracts.Priority, trace string) {
		tasks = append(tasks, dispatch.Task{Lane: lane, TraceParent: trace,
			Dispatch: events.TaskDispatched{TaskID: id, Type: taskType, Attempt: 1, NextRunTimeMs: id, Load: true}})
	}
	// 20 normal tasks of a.type with one high task of a.type among them,
	// one of b.type, and a traced task of a.type.
	for id := int64(1); id <= 21; id++ {
		lane := contracts.PriorityNormal
		if id == 5 {
			lane = contracts.PriorityHigh
		}
		add(id, "a.type", lane, "")
	}
	add(30, "b.type", contracts.PriorityNormal, "")
	add(31, "a.type", contracts.PriorityNormal, "00-0af7651916cd43dd8448eb211c00f319-b7ad6b7169203331-01")

	msgs, err := send.Messages(ctx, nil, tasks)
	require.NoError(t, err)
	before := testutil.ToFloat64(metrics.DispatchMessages)
	send.Sent(ctx, tasks)
	require.Equal(t, float64(len(msgs)), testutil.ToFloat64(metrics.DispatchMessages)-before,
		"every message counted once, as sent")

	normal := events.ExecSubject("a.type", contracts.PriorityNormal, events.SharedToken)
	type got struct {
		subject string
		ids     []int64
		batch   bool
	}
	var all []got
	seen := map[int64]int{}
	for _, m := range msgs {
		g := got{subject: m.Subject, batch: m.EventType == events.TypeTaskDispatches}
		if g.batch {
			var b events.TaskDispatches
			require.NoError(t, events.Decode(m.Data, &b))
			for _, d := range b.Tasks {
				g.ids = append(g.ids, d.TaskID)
			}
			require.Empty(t, m.TraceParent)
		} else {
			require.Equal(t, events.TypeTaskDispatched, m.EventType)
			var d events.TaskDispatched
			require.NoError(t, events.Decode(m.Data, &d))
			g.ids = []int64{d.TaskID}
		}
		for _, id := range g.ids {
			seen[id]++
			want := events.ExecSubject(map[bool]string{true: "b.type", false: "a.type"}[id == 30],
				map[bool]contracts.Priority{true: contracts.PriorityHigh, false: contracts.PriorityNormal}[id == 5], events.SharedToken)
			require.Equal(t, want, m.Subject, "task %d on its lane's subject", id)
		}
		all = append(all, g)
	}
	require.Len(t, seen, len(tasks), "every task dispatched")
	for id, n := range seen {
		require.Equal(t, 1, n, "task %d in exactly one message", id)
	}
	var batched [][]int64
	for _, g := range all {
		if g.batch {
			require.Equal(t, normal, g.subject)
			batched = append(batched, g.ids)
		} else {
			require.Len(t, g.ids, 1)
			require.Contains(t, []int64{5, 30, 31}, g.ids[0], "alone on its subject, or traced")
		}
	}
	require.Equal(t, [][]int64{
		{1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
		{18, 19, 20, 21},
	}, batched, "in the order given, at most MaxBatch a message")
	require.Len(t, msgs, 5)
	for _, m := range msgs {
		if m.EventType == events.TypeTaskDispatched && m.CorrelationID == "31" {
			require.NotEmpty(t, m.TraceParent, "the traced task carries its context in its own message")
		}
	}
}
