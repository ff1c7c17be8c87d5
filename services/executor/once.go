package executor

import (
	"context"
	"errors"

	"github.com/axsched/ax/services/internal/store"
)

// errOnceOutsideExecutor explains why Once cannot work in a bare context:
// the dedup table lives in the executor's store, which handlers never see.
var errOnceOutsideExecutor = errors.New("executor.Once needs a running executor: ctx carries no task store " +
	"(pass the ctx the executor gave the handler; in a handler's unit test, test the effect without Once)")

// Once runs fn, a side effect of handling t, at most once per key within
// t's type, so the effect survives t being delivered twice and t's work
// being resubmitted under a new task ID with the same key. It returns nil
// without calling fn when the effect already ran under this key; when fn
// fails, its error is returned unchanged and nothing is recorded, so a retry
// of the task runs fn again.
//
// fn runs while a MySQL transaction holds the key, and concurrent calls with
// the same key wait for it. If the process dies after fn's effect but before
// that transaction commits, the key is not stored and a retry runs fn again:
// where a duplicate would hurt, make fn idempotent toward its target as
// well, for instance by handing the same key to a target that checks it.
// See store.Store.Once for the details.
//
// Once works only with the ctx an executor passed to the handler.
func Once(ctx context.Context, t *Task, key string, fn func(ctx context.Context) error) error {
	st := storeFrom(ctx)
	if st == nil {
		return errOnceOutsideExecutor
	}
	// The store's errors already name the scope and key, and fn's error is
	// the handler's own, so neither is wrapped again.
	_, err := st.Once(ctx, store.OnceParams{Scope: t.Type, Key: key, TaskID: t.ID, Attempt: t.Attempt}, fn)
	return err
}
