package auth_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/auth"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// memKeys is an in-memory KeyStore that counts its reads and writes.
type memKeys struct {
	mu      sync.Mutex
	keys    map[string]*store.APIKey // by hash
	lookups int
	touches []time.Time
	fail    error
}

func (m *memKeys) APIKeyByHash(_ context.Context, hash []byte) (*store.APIKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	if m.fail != nil {
		return nil, m.fail
	}
	k, ok := m.keys[string(hash)]
	if !ok {
		return nil, store.ErrNotFound
	}
	c := *k
	return &c, nil
}

func (m *memKeys) TouchAPIKey(_ context.Context, _ int64, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.touches = append(m.touches, at)
	return nil
}

func (m *memKeys) add(t *testing.T, name string, role auth.Role) (string, *store.APIKey) {
	t.Helper()
	tok, err := auth.NewToken()
	require.NoError(t, err)
	k := &store.APIKey{ID: int64(len(m.keys) + 1), Name: name, Role: string(role), TokenHash: tok.Hash[:], Prefix: tok.Prefix}
	m.keys[string(tok.Hash[:])] = k
	return tok.Secret, k
}

func TestVerifyCachesAndSeesRevocationWithinTheTTL(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{now: time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)}
	keys := &memKeys{keys: map[string]*store.APIKey{}}
	token, row := keys.add(t, "alice", auth.RoleOperate)
	a := auth.New(auth.Config{CacheTTL: 5 * time.Second, TouchEvery: time.Minute}, keys, clk, testenv.Logger(t))

	k, err := a.Verify(ctx, token)
	require.NoError(t, err)
	require.Equal(t, &auth.Key{Name: "alice", Role: auth.RoleOperate}, k)
	_, err = a.Verify(ctx, token)
	require.NoError(t, err)
	require.Equal(t, 1, keys.lookups, "the second request is answered from the cache")
	require.Len(t, keys.touches, 1, "last use is written once a minute, not per request")

	revoked := clk.Now()
	keys.mu.Lock()
	row.RevokedAt = &revoked
	keys.mu.Unlock()
	_, err = a.Verify(ctx, token)
	require.NoError(t, err, "within the cache period the revocation is not seen yet")
	clk.advance(5 * time.Second)
	_, err = a.Verify(ctx, token)
	require.ErrorIs(t, err, auth.ErrRevoked)

	clk.advance(time.Minute)
	other, _ := keys.add(t, "bob", auth.RoleRead)
	_, err = a.Verify(ctx, other)
	require.NoError(t, err)
	require.Len(t, keys.touches, 2)
}

func TestVerifyRefusals(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{now: time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)}
	keys := &memKeys{keys: map[string]*store.APIKey{}}
	expiring, row := keys.add(t, "temp", auth.RoleRead)
	until := clk.Now().Add(time.Hour)
	row.ExpiresAt = &until
	a := auth.New(auth.Config{}, keys, clk, testenv.Logger(t))

	_, err := a.Verify(ctx, "")
	require.ErrorIs(t, err, auth.ErrNoToken)
	_, err = a.Verify(ctx, "ax_notatoken")
	require.ErrorIs(t, err, auth.ErrUnknownToken)
	_, err = a.Verify(ctx, expiring)
	require.NoError(t, err)
	clk.advance(time.Hour)
	_, err = a.Verify(ctx, expiring)
	require.ErrorIs(t, err, auth.ErrExpired, "expiry is checked on every request, cached or not")

	keys.fail = errors.New("mysql is down")
	_, err = a.Verify(ctx, "ax_another")
	require.ErrorContains(t, err, "mysql is down")
	for _, want := range []error{auth.ErrNoToken, auth.ErrUnknownToken, auth.ErrRevoked, auth.ErrExpired} {
		require.NotErrorIs(t, err, want, "an outage is not a refusal")
	}
}

func TestRuleAllows(t *testing.T) {
	// Written out rather than derived: the documented hierarchy.
	want := map[auth.Role][]string{
		auth.RoleSubmit:  {"open", "submit", "own"},
		auth.RoleRead:    {"open", "read", "own"},
		auth.RoleOperate: {"open", "submit", "read", "own", "operate"},
		auth.RoleAdmin:   {"open", "submit", "read", "own", "operate", "admin"},
	}
	rules := map[string]auth.Rule{
		"open": {Open: true}, "submit": {Role: auth.RoleSubmit}, "read": {Role: auth.RoleRead},
		"own": {Role: auth.RoleRead, OwnTasks: true}, "operate": {Role: auth.RoleOperate}, "admin": {Role: auth.RoleAdmin},
	}
	for _, role := range auth.Roles {
		for name, rule := range rules {
			require.Equal(t, contains(want[role], name), rule.Allows(role), "role %s on a %s route", role, name)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestNamesAndActors(t *testing.T) {
	for _, ok := range []string{"alice", "ci-deploy", "team.billing_2", "0"} {
		require.NoError(t, auth.ValidateName(ok), ok)
	}
	for _, bad := range []string{"", "Alice", "a b", "a/b", "-x", string(make([]byte, 65))} {
		require.Error(t, auth.ValidateName(bad), bad)
	}
	k := &auth.Key{Name: "alice", Role: auth.RoleSubmit}
	actor := auth.Actor(k, "submitter@n1")
	require.Equal(t, "key:alice via submitter@n1", actor)
	require.Equal(t, "submitter@n1", auth.Actor(nil, "submitter@n1"))
	require.Equal(t, "key:alice via submitter@n1 (note: bob)", auth.WithNote(actor, "bob"))
	require.True(t, auth.Owns(k, "key:alice via submitter@n2"), "ownership does not depend on the node")
	require.False(t, auth.Owns(k, "key:alicia via submitter@n1"))
	require.False(t, auth.Owns(&auth.Key{Name: "ali"}, actor))
	require.False(t, auth.Owns(nil, actor))
	require.False(t, auth.Owns(k, "submitter@n1"))
}

func TestNewTokenIsRandomAndHashed(t *testing.T) {
	a, err := auth.NewToken()
	require.NoError(t, err)
	b, err := auth.NewToken()
	require.NoError(t, err)
	require.NotEqual(t, a.Secret, b.Secret)
	require.Len(t, a.Secret, 3+52)
	require.Equal(t, a.Secret[:10], a.Prefix)
	require.Equal(t, auth.HashToken(a.Secret), a.Hash)
}

type counter int

func (c counter) CountUsableAPIKeys(context.Context, time.Time) (int, error) { return int(c), nil }

func TestDecide(t *testing.T) {
	tests := []struct {
		mode    auth.Mode
		addr    string
		keys    int
		enforce bool
		warn    bool
		err     string
	}{
		{auth.ModeAuto, "127.0.0.1:8080", 0, false, false, ""},
		{auth.ModeAuto, "[::1]:8080", 0, false, false, ""},
		{auth.ModeAuto, "localhost:8080", 0, false, false, ""},
		{auth.ModeAuto, "127.0.0.1:8080", 1, true, false, ""},
		{auth.ModeAuto, "0.0.0.0:8080", 0, false, false, "not a loopback address"},
		{auth.ModeAuto, ":8080", 0, false, false, "not a loopback address"},
		{auth.ModeAuto, "10.0.0.5:8080", 2, true, false, ""},
		{auth.ModeOn, "127.0.0.1:8080", 0, true, false, ""},
		{auth.ModeOn, "0.0.0.0:8080", 0, false, false, "not a loopback address"},
		{auth.ModeOff, "127.0.0.1:8080", 3, false, false, ""},
		{auth.ModeOff, "0.0.0.0:8080", 0, false, true, ""},
	}
	for _, tc := range tests {
		d, err := auth.Decide(context.Background(), tc.mode, tc.addr, counter(tc.keys), time.Now())
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "%s %s %d keys", tc.mode, tc.addr, tc.keys)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.enforce, d.Enforce, "%s %s %d keys", tc.mode, tc.addr, tc.keys)
		require.Equal(t, tc.warn, d.Warn, "%s %s %d keys", tc.mode, tc.addr, tc.keys)
		require.NotEmpty(t, d.Message)
	}
	_, err := auth.ParseMode("maybe")
	require.Error(t, err)
}
