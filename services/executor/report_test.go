package executor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWebhookAnswerBecomesResult: a 2xx JSON answer is kept as the task's
// result; a text answer, an invalid JSON one or an empty one is not, and
// the call still succeeds.
func TestWebhookAnswerBecomesResult(t *testing.T) {
	tests := []struct {
		name, contentType, body, want string
	}{
		{"json", "application/json; charset=utf-8", `{"receipt":"r-1"}`, `{"receipt":"r-1"}`},
		{"text", "text/plain", `ok`, ""},
		{"invalid json", "application/json", `{"receipt":`, ""},
		{"empty", "application/json", ``, ""},
		{"over the limit", "application/json", `"` + strings.Repeat("x", 64<<10) + `"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			h, err := Webhook(WebhookConfig{URL: srv.URL, Secret: []byte("0123456789abcdef0123")})
			require.NoError(t, err)
			rep := &report{}
			require.NoError(t, h.Handle(withReport(context.Background(), rep), &Task{ID: 1, Type: "t", Attempt: 1}))
			require.Equal(t, tc.want, string(rep.resultOf()))
		})
	}
}
