package executor

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/testenv"
)

func TestOnceAbsorbsDuplicateDeliveryAndResubmission(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := withStore(context.Background(), st)
	var refunds atomic.Int32
	refund := func(context.Context) error { refunds.Add(1); return nil }

	// The same task delivered twice: the second delivery is a later attempt.
	first := &Task{ID: 101, Type: "payment.refund", Attempt: 1}
	require.NoError(t, Once(ctx, first, "refund:order-42", refund))
	redelivered := &Task{ID: 101, Type: "payment.refund", Attempt: 2}
	require.NoError(t, Once(ctx, redelivered, "refund:order-42", refund))
	// The same work resubmitted under a new task ID.
	resubmitted := &Task{ID: 202, Type: "payment.refund", Attempt: 1}
	require.NoError(t, Once(ctx, resubmitted, "refund:order-42", refund))

	require.Equal(t, int32(1), refunds.Load(), "the refund happens once")
}

func TestOnceScopesKeysByTaskType(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := withStore(context.Background(), st)
	var effects atomic.Int32
	effect := func(context.Context) error { effects.Add(1); return nil }

	require.NoError(t, Once(ctx, &Task{ID: 1, Type: "payment.refund", Attempt: 1}, "order-42", effect))
	require.NoError(t, Once(ctx, &Task{ID: 2, Type: "sms.send", Attempt: 1}, "order-42", effect))
	require.Equal(t, int32(2), effects.Load(), "one key in two task types names two effects")
}

func TestOnceOutsideExecutorFails(t *testing.T) {
	called := false
	err := Once(context.Background(), &Task{ID: 1, Type: "payment.refund"}, "k", func(context.Context) error {
		called = true
		return nil
	})
	require.ErrorContains(t, err, "needs a running executor")
	require.False(t, called)
}

// An executor sizes Once's pool to its handler slots, the sum of its types'
// concurrency, so every running handler can hold its effect's connection
// however many that is.
func TestExecutorSizesOncePoolToItsSlots(t *testing.T) {
	st, _ := testenv.Store(t)
	noop := HandlerFunc(func(context.Context, *Task) error { return nil })
	_, err := New(Config{Node: "sized"}, st, nil, keys.New("ax"), nil, nil, testenv.Logger(t), []TypeSpec{
		{Name: "pool.a", Handler: noop, Concurrency: 40},
		{Name: "pool.b", Handler: noop, Concurrency: 8},
		{Name: "pool.c", Handler: noop}, // the default concurrency
	})
	require.NoError(t, err)
	require.Equal(t, 40+8+ConcurrencyDefault, st.OncePoolSize())
}
