package executor

import (
	"context"

	"github.com/axsched/ax/services/internal/store"
)

type storeKey struct{}

// withStore lets helpers that handlers call (Once) reach the task store
// without handlers ever seeing it.
func withStore(ctx context.Context, st *store.Store) context.Context {
	return context.WithValue(ctx, storeKey{}, st)
}

// storeFrom returns the store of the executor running the handler, or nil
// outside an executor (in a handler's unit test, say).
func storeFrom(ctx context.Context) *store.Store {
	st, _ := ctx.Value(storeKey{}).(*store.Store)
	return st
}
