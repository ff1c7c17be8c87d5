package store_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

func hashOf(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func TestAPIKeyLifecycle(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	now := time.Now()

	n, err := st.CountUsableAPIKeys(ctx, now)
	require.NoError(t, err)
	require.Zero(t, n)

	alice, err := st.CreateAPIKey(ctx, store.NewAPIKey{Name: "alice", Role: "operate", TokenHash: hashOf("a"), Prefix: "ax_aaaa"})
	require.NoError(t, err)
	require.Equal(t, "alice", alice.Name)
	require.Equal(t, "operate", alice.Role)
	require.Nil(t, alice.RevokedAt)
	require.Nil(t, alice.ExpiresAt)

	_, err = st.CreateAPIKey(ctx, store.NewAPIKey{Name: "alice", Role: "read", TokenHash: hashOf("b"), Prefix: "ax_bbbb"})
	require.ErrorIs(t, err, store.ErrNameTaken)
	_, err = st.CreateAPIKey(ctx, store.NewAPIKey{Name: "short", Role: "read", TokenHash: []byte("x"), Prefix: "ax_x"})
	require.ErrorContains(t, err, "want 32")

	past := now.Add(-time.Minute)
	_, err = st.CreateAPIKey(ctx, store.NewAPIKey{Name: "old", Role: "read", TokenHash: hashOf("o"), Prefix: "ax_oooo", ExpiresAt: &past})
	require.NoError(t, err)
	n, err = st.CountUsableAPIKeys(ctx, now)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the expired key does not count")

	got, err := st.APIKeyByHash(ctx, hashOf("a"))
	require.NoError(t, err)
	require.Equal(t, alice.ID, got.ID)
	_, err = st.APIKeyByHash(ctx, hashOf("nobody"))
	require.ErrorIs(t, err, store.ErrNotFound)

	used := now.Add(time.Second).Truncate(time.Millisecond)
	require.NoError(t, st.TouchAPIKey(ctx, alice.ID, used))
	got, err = st.APIKeyByName(ctx, "alice")
	require.NoError(t, err)
	require.NotNil(t, got.LastUsedAt)
	require.WithinDuration(t, used, *got.LastUsedAt, time.Millisecond)

	revoked, err := st.RevokeAPIKey(ctx, "alice")
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)
	_, err = st.RevokeAPIKey(ctx, "alice")
	require.ErrorIs(t, err, store.ErrRevoked)
	_, err = st.RevokeAPIKey(ctx, "nobody")
	require.ErrorIs(t, err, store.ErrNotFound)
	n, err = st.CountUsableAPIKeys(ctx, now)
	require.NoError(t, err)
	require.Zero(t, n)

	keys, err := st.ListAPIKeys(ctx)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	require.Equal(t, []string{"alice", "old"}, []string{keys[0].Name, keys[1].Name})
}

func TestTaskCreatorIsTheCreatingRowsActor(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	_, err := st.TaskCreator(ctx, 42)
	require.ErrorIs(t, err, store.ErrNotFound)
	task, _, err := st.CreateTask(ctx, store.NewTask{ID: 42, Type: "ax.noop", Priority: contracts.PriorityNormal,
		Status: contracts.StatusReady, NextRunTimeMs: 1, MaxRetries: 3, TimeoutMs: 1000, Reason: "test", Actor: "key:alice via submitter@n"})
	require.NoError(t, err)
	_, err = st.Transfer(ctx, store.TransferParams{TaskID: task.ID, From: contracts.StatusReady, To: contracts.StatusCancelled,
		Reason: "test", Actor: "key:bob via submitter@n"})
	require.NoError(t, err)
	creator, err := st.TaskCreator(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, "key:alice via submitter@n", creator)
}
