package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWhoAmIPrintsTheKey: the key's name and role, or that the server
// checks none, in text and as JSON; the token read from AX_TOKEN is sent.
func TestWhoAmIPrintsTheKey(t *testing.T) {
	tests := []struct {
		name, answer, output, want string
	}{
		{"key", `{"auth":true,"name":"alice","role":"operate"}`, "text", "key alice, role operate\n"},
		{"open", `{"auth":false}`, "text", "no key: this ax checks no API keys (bound to loopback with none, or --auth off)\n"},
		{"json", `{"auth":true,"name":"alice","role":"read"}`, "json", "{\n  \"auth\": true,\n  \"name\": \"alice\",\n  \"role\": \"read\"\n}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				require.Equal(t, "/v1/whoami", r.URL.Path)
				require.Equal(t, "Bearer ax_test", r.Header.Get("Authorization"))
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.answer))
			}))
			defer srv.Close()
			t.Setenv("AX_TOKEN", "ax_test")
			cmd := newWhoAmICmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetArgs([]string{"--api", srv.URL, "-o", tc.output})
			require.NoError(t, cmd.Execute())
			require.Equal(t, tc.want, out.String())
		})
	}
}
