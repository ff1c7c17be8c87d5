package submitter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/internal/auth"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/ops"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/submitter"
)

// operation is one operation of the OpenAPI document, as the walk needs it.
type operation struct {
	method, path string
	role         string // x-ax-role
	ownTasks     bool   // x-ax-own-tasks
	body         []byte // the request body's example, if any
}

func documentedOperations(t *testing.T) []operation {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(contracts.OpenAPI, &doc))
	var ops []operation
	for path, item := range doc.Paths {
		for method, node := range item {
			if method == "parameters" {
				continue
			}
			var op struct {
				Role        string `yaml:"x-ax-role"`
				OwnTasks    bool   `yaml:"x-ax-own-tasks"`
				RequestBody struct {
					Content map[string]struct {
						Example any `yaml:"example"`
					} `yaml:"content"`
				} `yaml:"requestBody"`
			}
			require.NoError(t, node.Decode(&op), "%s %s", method, path)
			o := operation{method: strings.ToUpper(method), path: path, role: op.Role, ownTasks: op.OwnTasks}
			if ex := op.RequestBody.Content["application/json"].Example; ex != nil {
				b, err := json.Marshal(ex)
				require.NoError(t, err)
				o.body = b
			}
			ops = append(ops, o)
		}
	}
	require.GreaterOrEqual(t, len(ops), 17, "the walk found too few operations")
	return ops
}

// mayCall is the documented hierarchy, written out independently of
// auth.Rule: admin ⊇ operate ⊇ read, operate ⊇ submit, and a submit key
// reads its own tasks.
func mayCall(role auth.Role, op operation) bool {
	switch {
	case op.role == "none":
		return true
	case role == auth.RoleAdmin:
		return true
	case role == auth.RoleOperate:
		return op.role != "admin"
	case role == auth.RoleRead:
		return op.role == "read"
	case role == auth.RoleSubmit:
		return op.role == "submit" || op.ownTasks
	}
	return false
}

type authServer struct {
	base   string
	st     *store.Store
	tokens map[string]string // credential name -> token
}

func startAuthServer(t *testing.T) *authServer {
	t.Helper()
	ctx := context.Background()
	st, _ := testenv.Store(t)
	require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: "ax.noop", TimeoutMs: 60000, MaxRetries: 3, Priority: contracts.PriorityNormal}))
	tokens := map[string]string{"none": ""}
	for _, r := range auth.Roles {
		tok, _, err := auth.CreateKey(ctx, st, "role-"+string(r), r, nil)
		require.NoError(t, err)
		tokens[string(r)] = tok.Secret
	}
	revoked, _, err := auth.CreateKey(ctx, st, "revoked", auth.RoleAdmin, nil)
	require.NoError(t, err)
	_, err = st.RevokeAPIKey(ctx, "revoked")
	require.NoError(t, err)
	tokens["revoked"] = revoked.Secret
	past := time.Now().Add(-time.Minute)
	expired, _, err := auth.CreateKey(ctx, st, "expired", auth.RoleAdmin, &past)
	require.NoError(t, err)
	tokens["expired"] = expired.Secret
	wrong, err := auth.NewToken()
	require.NoError(t, err)
	tokens["wrong"] = wrong.Secret
	_, _, err = auth.CreateKey(ctx, st, "victim", auth.RoleRead, nil)
	require.NoError(t, err)

	logger := testenv.Logger(t)
	ids, err := idgen.New(1)
	require.NoError(t, err)
	srv := ops.New("127.0.0.1:0", ops.Config{}, logger)
	sub := submitter.New(submitter.Config{Node: "test", MaxPayload: 1024, MaxHorizon: time.Hour}, st, ids, clock.System{}, logger)
	sub.Routes(srv.Mux)
	srv.Use(auth.Middleware(srv.Mux, auth.New(auth.Config{}, st, clock.System{}, logger), logger))
	require.NoError(t, srv.Listen())
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return &authServer{base: "http://" + srv.Addr(), st: st, tokens: tokens}
}

func (a *authServer) call(t *testing.T, cred, method, path string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, a.base+path, r)
	require.NoError(t, err)
	if method != http.MethodGet {
		// The edge wants it on every state-changing request, bodyless too.
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := a.tokens[cred]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

func (a *authServer) submit(t *testing.T, cred string) string {
	t.Helper()
	status, _, body := a.call(t, cred, http.MethodPost, "/v1/tasks", []byte(`{"type":"ax.noop"}`))
	require.Equal(t, http.StatusCreated, status, string(body))
	var task contracts.Task
	require.NoError(t, json.Unmarshal(body, &task))
	return task.ID
}

// TestEveryOperationTimesEveryCredential walks every operation of the
// OpenAPI document with no token, a wrong, a revoked and an expired one
// (401), and a key of every role: 403 when the documented role does not
// suffice, anything but 401/403 when it does. The document and the server
// cannot drift apart without this failing.
func TestEveryOperationTimesEveryCredential(t *testing.T) {
	a := startAuthServer(t)
	own := a.submit(t, string(auth.RoleSubmit))
	fill := strings.NewReplacer("{id}/retry", "1/retry", "{id}", own)
	creds := []string{"none", "wrong", "revoked", "expired", "submit", "read", "operate", "admin"}
	for _, op := range documentedOperations(t) {
		path := fill.Replace(op.path)
		path = strings.ReplaceAll(path, "/v1/types/{name}", "/v1/types/ax.noop")
		path = strings.ReplaceAll(path, "/v1/keys/{name}", "/v1/keys/victim")
		for _, cred := range creds {
			status, header, body := a.call(t, cred, op.method, path, op.body)
			what := fmt.Sprintf("%s %s as %s: %d %s", op.method, path, cred, status, body)
			role, isRole := auth.ParseRole(cred)
			switch {
			case op.role == "none":
				require.NotContains(t, []int{401, 403}, status, what)
			case isRole != nil:
				require.Equal(t, http.StatusUnauthorized, status, what)
				require.Contains(t, header.Get("WWW-Authenticate"), "Bearer", what)
				require.Contains(t, string(body), contracts.CodeUnauthenticated, what)
			case mayCall(role, op):
				require.NotContains(t, []int{401, 403}, status, what)
			default:
				require.Equal(t, http.StatusForbidden, status, what)
				require.Contains(t, string(body), contracts.CodeForbidden, what)
			}
		}
	}
}

// TestSubmitKeysReadOnlyTheirOwnTasks: a submit key may read what it
// created and gets 403 for another key's task; the history names the key
// as creator and as canceller, and an operator's ?actor= is only a note.
func TestSubmitKeysReadOnlyTheirOwnTasks(t *testing.T) {
	a := startAuthServer(t)
	mine := a.submit(t, "submit")
	theirs := a.submit(t, "operate")
	for _, path := range []string{"/v1/tasks/" + mine, "/v1/tasks/" + mine + "/history"} {
		status, _, body := a.call(t, "submit", http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, status, string(body))
	}
	for _, path := range []string{"/v1/tasks/" + theirs, "/v1/tasks/" + theirs + "/history"} {
		status, _, body := a.call(t, "submit", http.MethodGet, path, nil)
		require.Equal(t, http.StatusForbidden, status, string(body))
	}
	status, _, body := a.call(t, "submit", http.MethodGet, "/v1/tasks/12345", nil)
	require.Equal(t, http.StatusNotFound, status, string(body))

	status, _, body = a.call(t, "operate", http.MethodPost, "/v1/tasks/"+mine+"/cancel", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	status, _, body = a.call(t, "read", http.MethodGet, "/v1/tasks/"+mine+"/history", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	var h contracts.History
	require.NoError(t, json.Unmarshal(body, &h))
	require.Len(t, h.History, 2)
	require.Equal(t, "key:role-submit via submitter@test", h.History[0].Actor)
	require.Equal(t, "key:role-operate via submitter@test", h.History[1].Actor)
}

// TestKeysAPICreatesAndRevokes: a key made through the API works at once,
// shows up without its token, and stops working when revoked (this
// server's cache is bypassed by a fresh token; revocation is seen after
// the cache period, which auth's own tests cover).
func TestKeysAPICreatesAndRevokes(t *testing.T) {
	a := startAuthServer(t)
	status, _, body := a.call(t, "admin", http.MethodPost, "/v1/keys", []byte(`{"name":"ci","role":"read","expires_in":"1h"}`))
	require.Equal(t, http.StatusCreated, status, string(body))
	var created contracts.APIKeyCreated
	require.NoError(t, json.Unmarshal(body, &created))
	require.True(t, strings.HasPrefix(created.Token, auth.TokenPrefix))
	require.Equal(t, created.Token[:10], created.Key.Prefix)
	require.NotNil(t, created.Key.ExpiresAt)
	a.tokens["ci"] = created.Token
	status, _, body = a.call(t, "ci", http.MethodGet, "/v1/types", nil)
	require.Equal(t, http.StatusOK, status, string(body))

	status, _, body = a.call(t, "admin", http.MethodPost, "/v1/keys", []byte(`{"name":"ci","role":"read"}`))
	require.Equal(t, http.StatusConflict, status, string(body))
	for _, bad := range []string{`{"name":"Bad Name","role":"read"}`, `{"name":"x","role":"root"}`, `{"name":"x","role":"read","expires_in":"-1h"}`} {
		status, _, body = a.call(t, "admin", http.MethodPost, "/v1/keys", []byte(bad))
		require.Equal(t, http.StatusBadRequest, status, string(body))
	}
	status, _, body = a.call(t, "admin", http.MethodGet, "/v1/keys", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	require.NotContains(t, string(body), created.Token)
	status, _, body = a.call(t, "admin", http.MethodDelete, "/v1/keys/ci", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	status, _, body = a.call(t, "admin", http.MethodDelete, "/v1/keys/ci", nil)
	require.Equal(t, http.StatusConflict, status, string(body))
	status, _, body = a.call(t, "admin", http.MethodDelete, "/v1/keys/nobody", nil)
	require.Equal(t, http.StatusNotFound, status, string(body))
}

// TestWhoAmINamesTheKey: the console learns whose name its actions carry.
func TestWhoAmINamesTheKey(t *testing.T) {
	a := startAuthServer(t)
	for _, role := range []string{"read", "operate", "admin"} {
		status, _, body := a.call(t, role, http.MethodGet, "/v1/whoami", nil)
		require.Equal(t, http.StatusOK, status, string(body))
		var c contracts.Caller
		require.NoError(t, json.Unmarshal(body, &c))
		require.Equal(t, contracts.Caller{Auth: true, Name: "role-" + role, Role: role}, c)
	}
	status, _, body := a.call(t, "submit", http.MethodGet, "/v1/whoami", nil)
	require.Equal(t, http.StatusForbidden, status, string(body))
	require.Contains(t, string(body), "role-submit has role submit")

	c, err := client.New(a.base, client.WithToken(a.tokens["operate"])).WhoAmI(context.Background())
	require.NoError(t, err)
	require.Equal(t, &contracts.Caller{Auth: true, Name: "role-operate", Role: "operate"}, c)
}
