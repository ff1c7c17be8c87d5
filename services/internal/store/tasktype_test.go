package store_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

func registerType(t testing.TB, st *store.Store, name string) {
	t.Helper()
	require.NoError(t, st.RegisterType(context.Background(), store.TaskType{
		Name: name, TimeoutMs: 60000, MaxRetries: 3, Priority: contracts.PriorityNormal,
	}))
}

type outboxRow struct {
	Subject, Type, CorrelationID string
	Payload                      []byte
}

func outboxRows(t *testing.T, db *sql.DB) []outboxRow {
	t.Helper()
	rows, err := db.Query(`SELECT subject, event_type, correlation_id, payload FROM outbox ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		require.NoError(t, rows.Scan(&r.Subject, &r.Type, &r.CorrelationID, &r.Payload))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

func drainWake(st *store.Store) {
	select {
	case <-st.Wake():
	default:
	}
}

func TestUpdateTypeChangesEveryColumnAndQueuesOneEvent(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	registerType(t, st, "sms.send")
	before, err := st.GetType(ctx, "sms.send")
	require.NoError(t, err)
	drainWake(st)

	got, err := st.UpdateType(ctx, "sms.send", "operator@test", func(tt *store.TaskType) error {
		tt.Name = "ignored.rename"
		tt.TimeoutMs = 1_800_000
		tt.MaxRetries = 7
		tt.Priority = contracts.PriorityHigh
		tt.Concurrency = 40
		tt.BackoffBaseMs = 2000
		tt.BackoffCapMs = 120_000
		tt.FailSilently = true
		tt.Paused = true
		return nil
	})
	require.NoError(t, err)

	want := store.TaskType{
		Name: "sms.send", TimeoutMs: 1_800_000, MaxRetries: 7, Priority: contracts.PriorityHigh,
		Concurrency: 40, BackoffBaseMs: 2000, BackoffCapMs: 120_000, FailSilently: true, Paused: true,
		UpdatedAt: got.UpdatedAt,
	}
	require.Equal(t, want, *got, "the returned type")
	stored, err := st.GetType(ctx, "sms.send")
	require.NoError(t, err)
	require.Equal(t, want, *stored, "the stored row, every column")
	require.False(t, got.UpdatedAt.Before(before.UpdatedAt), "updated_at moves forward")
	_, err = st.GetType(ctx, "ignored.rename")
	require.ErrorIs(t, err, store.ErrNotFound, "fn cannot rename a type")

	rows := outboxRows(t, st.DB())
	require.Len(t, rows, 1, "exactly one event")
	require.Equal(t, events.SubjectTypeChanged, rows[0].Subject)
	require.Equal(t, events.TypeTaskTypeChanged, rows[0].Type)
	require.Equal(t, "sms.send", rows[0].CorrelationID)
	var ev events.TaskTypeChanged
	require.NoError(t, events.Decode(rows[0].Payload, &ev))
	require.Equal(t, events.TaskTypeChanged{Name: "sms.send", Paused: true, Concurrency: 40,
		Actor: "operator@test", At: got.UpdatedAt}, ev)

	select {
	case <-st.Wake():
	case <-time.After(time.Second):
		t.Fatal("the relay was not woken after the commit")
	}
}

func TestUpdateTypeFailuresWriteNothing(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name    string
		typ     string
		fn      func(*store.TaskType) error
		wantErr error
	}{
		{"unknown type", "no.such.type", func(*store.TaskType) error { return nil }, store.ErrNotFound},
		{"fn error after changing the row", "sms.send", func(tt *store.TaskType) error {
			tt.Paused, tt.Concurrency, tt.TimeoutMs = true, 9, 1
			return errBoom
		}, errBoom},
		{"unknown priority", "sms.send", func(tt *store.TaskType) error {
			tt.Priority = "urgent"
			return nil
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := testenv.Store(t)
			ctx := context.Background()
			registerType(t, st, "sms.send")
			before, err := st.ListTypes(ctx)
			require.NoError(t, err)

			got, err := st.UpdateType(ctx, tc.typ, "operator@test", tc.fn)
			require.Error(t, err)
			require.Nil(t, got)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			}
			after, err := st.ListTypes(ctx)
			require.NoError(t, err)
			require.Equal(t, before, after, "task_types unchanged and no type created")
			require.Empty(t, outboxRows(t, st.DB()), "no event")
		})
	}
}

// TestUpdateTypeSerializesConcurrentUpdates shows the row lock at work: 20
// read-modify-write updates racing on one type lose none of their increments.
func TestUpdateTypeSerializesConcurrentUpdates(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	registerType(t, st, "sms.send")

	const racers = 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			<-start
			_, errs[i] = st.UpdateType(ctx, "sms.send", "racer", func(tt *store.TaskType) error {
				tt.Concurrency++
				return nil
			})
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	got, err := st.GetType(ctx, "sms.send")
	require.NoError(t, err)
	require.Equal(t, racers, got.Concurrency)
	require.Len(t, outboxRows(t, st.DB()), racers, "one event per update")
}

func TestListTypesOrderedByName(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()

	got, err := st.ListTypes(ctx)
	require.NoError(t, err)
	require.NotNil(t, got, "an empty list, not nil, so JSON shows []")
	require.Empty(t, got)

	for _, name := range []string{"sms.send", "file.export", "mail.send", "audit"} {
		registerType(t, st, name)
	}
	got, err = st.ListTypes(ctx)
	require.NoError(t, err)
	names := make([]string, len(got))
	for i, tt := range got {
		names[i] = tt.Name
		require.Equal(t, int64(60000), tt.TimeoutMs)
		require.Equal(t, int64(1000), tt.BackoffBaseMs, "column default")
		require.Equal(t, int64(600000), tt.BackoffCapMs, "column default")
	}
	require.Equal(t, []string{"audit", "file.export", "mail.send", "sms.send"}, names)
}

func TestTaskTypeAPIFillsEveryField(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	tt := store.TaskType{
		Name: "file.export", TimeoutMs: 1_800_000, MaxRetries: 5, Priority: contracts.PriorityLow,
		Concurrency: 8, BackoffBaseMs: 1500, BackoffCapMs: 600_000, FailSilently: true, Paused: true, UpdatedAt: at,
	}
	require.Equal(t, contracts.TaskType{
		Name: "file.export", Timeout: "30m0s", MaxRetries: 5, Priority: contracts.PriorityLow,
		Concurrency: 8, BackoffBase: "1.5s", BackoffCap: "10m0s", FailSilently: true, Paused: true, UpdatedAt: at,
	}, tt.API())
}

func TestTypeCacheServesFreshThenReloads(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	registerType(t, st, "sms.send")
	clk := &testenv.Clock{}
	c := store.NewTypeCache(st, time.Minute, clk)
	first, err := c.Get(ctx, "sms.send")
	require.NoError(t, err)
	_, err = st.UpdateType(ctx, "sms.send", "test", func(tt *store.TaskType) error { tt.Paused = true; return nil })
	require.NoError(t, err)
	cached, err := c.Get(ctx, "sms.send")
	require.NoError(t, err)
	require.Equal(t, first.Paused, cached.Paused, "within the TTL the cached settings are served")
	clk.Skip(time.Minute)
	fresh, err := c.Get(ctx, "sms.send")
	require.NoError(t, err)
	require.True(t, fresh.Paused, "after the TTL the change is seen")
	_, err = c.Get(ctx, "no.such")
	require.ErrorIs(t, err, store.ErrNotFound)
}
