package executor_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/executor"
)

var (
	webhookSecret      = []byte("webhook-test-secret-0123456789")
	webhookOtherSecret = []byte("another-secret-nobody-configured")
	webhookNow         = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// delivery is what a receiver saw of one call.
type delivery struct {
	header http.Header
	body   []byte
	err    error // from VerifyWebhook
}

// receiver starts a real HTTP server that verifies every call with secret at
// webhookNow, reports it on the returned channel, and answers 401 to a call
// that fails verification or else what respond writes.
func receiver(t *testing.T, secret []byte, respond http.HandlerFunc) (*httptest.Server, <-chan delivery) {
	t.Helper()
	seen := make(chan delivery, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := executor.VerifyWebhook(secret, r, time.Minute, webhookNow)
		seen <- delivery{header: r.Header.Clone(), body: body, err: err}
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		respond(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

func newWebhook(t *testing.T, url string) executor.Handler {
	t.Helper()
	h, err := executor.Webhook(executor.WebhookConfig{
		URL: url, Secret: webhookSecret, Clock: func() time.Time { return webhookNow },
	})
	require.NoError(t, err)
	return h
}

func TestWebhookDeliversSignedTask(t *testing.T) {
	tests := []struct {
		name        string
		payload     json.RawMessage
		wantPayload string
	}{
		{"object payload kept unescaped", json.RawMessage(`{"to":"<a&b>","n":1}`), `{"to":"<a&b>","n":1}`},
		{"no payload is null", nil, `null`},
		{"empty payload is null", json.RawMessage{}, `null`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, seen := receiver(t, webhookSecret, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusNoContent)
			})
			task := &executor.Task{ID: 2128092041172955136, Type: "sms.send", Attempt: 2, Payload: tc.payload}
			require.NoError(t, newWebhook(t, srv.URL+"/hook").Handle(context.Background(), task))

			d := <-seen
			require.NoError(t, d.err)
			var got struct {
				ID      string          `json:"id"`
				Type    string          `json:"type"`
				Attempt int             `json:"attempt"`
				Payload json.RawMessage `json:"payload"`
			}
			require.NoError(t, json.Unmarshal(d.body, &got))
			require.Equal(t, "2128092041172955136", got.ID)
			require.Equal(t, "sms.send", got.Type)
			require.Equal(t, 2, got.Attempt)
			require.JSONEq(t, tc.wantPayload, string(got.Payload))
			require.Contains(t, string(d.body), tc.wantPayload, "payload must not be re-escaped")

			require.Equal(t, "application/json", d.header.Get("Content-Type"))
			require.Equal(t, "2128092041172955136", d.header.Get("Ax-Task-Id"))
			require.Equal(t, "2", d.header.Get("Ax-Task-Attempt"))
			ts := d.header.Get("Ax-Timestamp")
			require.Equal(t, strconv.FormatInt(webhookNow.Unix(), 10), ts)
			// Pin the documented scheme independently of the package's code.
			mac := hmac.New(sha256.New, webhookSecret)
			mac.Write([]byte(ts + "." + string(d.body)))
			require.Equal(t, "v1="+hex.EncodeToString(mac.Sum(nil)), d.header.Get("Ax-Signature"))
		})
	}
}

// TestWebhookDocumentedVector keeps the example in docs/executors.md, which
// receivers in other languages test against, true.
func TestWebhookDocumentedVector(t *testing.T) {
	secret := []byte("ax-example-secret-0123456789")
	srv, seen := receiver(t, secret, func(w http.ResponseWriter, _ *http.Request) {})
	h, err := executor.Webhook(executor.WebhookConfig{
		URL: srv.URL, Secret: secret, Clock: func() time.Time { return webhookNow },
	})
	require.NoError(t, err)
	task := &executor.Task{ID: 2128092041172955136, Type: "sms.send", Attempt: 1, Payload: json.RawMessage(`{"to": "+15550100"}`)}
	require.NoError(t, h.Handle(context.Background(), task))
	d := <-seen
	require.NoError(t, d.err)
	require.Equal(t, `{"id":"2128092041172955136","type":"sms.send","attempt":1,"payload":{"to":"+15550100"}}`, string(d.body))
	require.Equal(t, "1772366400", d.header.Get("Ax-Timestamp"))
	require.Equal(t, "v1=654358a2bebdc7b027041e707c239e364034bbb0a618d7aea24f5de9b8ff542f", d.header.Get("Ax-Signature"))
}

func TestWebhookDefaultClockSignsNow(t *testing.T) {
	seen := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := executor.VerifyWebhook(webhookSecret, r, 5*time.Second, time.Now())
		seen <- err
	}))
	defer srv.Close()
	h, err := executor.Webhook(executor.WebhookConfig{URL: srv.URL, Secret: webhookSecret})
	require.NoError(t, err)
	require.NoError(t, h.Handle(context.Background(), &executor.Task{ID: 1, Type: "t", Attempt: 1}))
	require.NoError(t, <-seen)
}

func TestWebhookOutcomes(t *testing.T) {
	tests := []struct {
		name          string
		serverSecret  []byte
		status        int
		body          string
		closed        bool // nothing listens at the URL
		wantErr       bool
		wantStatus    int // of the WebhookStatusError; 0 when there is no answer
		wantPermanent bool
		wantInErr     []string
	}{
		{name: "200 succeeds", status: 200, body: "ok"},
		{name: "202 succeeds", status: 202},
		{name: "bad signature refused with 401 is permanent", serverSecret: webhookOtherSecret,
			wantErr: true, wantStatus: 401, wantPermanent: true, wantInErr: []string{"401", "webhook signature invalid"}},
		{name: "400 is permanent", status: 400, body: `{"error":"bad phone number"}`,
			wantErr: true, wantStatus: 400, wantPermanent: true, wantInErr: []string{"400", "bad phone number"}},
		{name: "404 is permanent", status: 404, wantErr: true, wantStatus: 404, wantPermanent: true, wantInErr: []string{"404"}},
		{name: "redirect is not followed and is permanent", status: 302,
			wantErr: true, wantStatus: 302, wantPermanent: true, wantInErr: []string{"302"}},
		{name: "408 is retryable", status: 408, wantErr: true, wantStatus: 408, wantInErr: []string{"408"}},
		{name: "429 is retryable", status: 429, body: "slow down", wantErr: true, wantStatus: 429, wantInErr: []string{"429", "slow down"}},
		{name: "500 is retryable", status: 500, body: "database down", wantErr: true, wantStatus: 500, wantInErr: []string{"500", "database down"}},
		{name: "503 is retryable", status: 503, wantErr: true, wantStatus: 503, wantInErr: []string{"503"}},
		{name: "huge error body is cut", status: 500, body: strings.Repeat("x", 4<<20),
			wantErr: true, wantStatus: 500, wantInErr: []string{"500", strings.Repeat("x", 512) + `"...`}},
		{name: "connection refused is retryable", closed: true, wantErr: true, wantInErr: []string{"connect"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			secret := webhookSecret
			if tc.serverSecret != nil {
				secret = tc.serverSecret
			}
			redirected := make(chan struct{}, 1)
			elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { redirected <- struct{}{} }))
			defer elsewhere.Close()
			srv, _ := receiver(t, secret, func(w http.ResponseWriter, _ *http.Request) {
				if tc.status == http.StatusFound {
					w.Header().Set("Location", elsewhere.URL)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			if tc.closed {
				srv.Close()
			}

			err := newWebhook(t, srv.URL).Handle(context.Background(), &executor.Task{ID: 7, Type: "t", Attempt: 1})
			if !tc.wantErr {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			t.Log(err)
			require.Equal(t, tc.wantPermanent, executor.IsPermanent(err))
			for _, s := range tc.wantInErr {
				require.Contains(t, err.Error(), s)
			}
			require.NotContains(t, err.Error(), string(webhookSecret))
			require.Less(t, len(err.Error()), 1024, "error text quotes at most 512 bytes of the body")
			var serr *executor.WebhookStatusError
			if tc.wantStatus != 0 {
				require.ErrorAs(t, err, &serr)
				require.Equal(t, tc.wantStatus, serr.StatusCode)
			} else {
				require.NotErrorAs(t, err, &serr)
			}
			require.Empty(t, redirected, "a redirect must not be followed")
		})
	}
}

func TestWebhookContextAbortsRequest(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // 0: cancelled once the receiver has the request
		wantErr error
	}{
		{"task deadline", 200 * time.Millisecond, context.DeadlineExceeded},
		{"cancellation mid-request", 0, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{}, 1)
			aborted := make(chan struct{}, 1)
			srv, _ := receiver(t, webhookSecret, func(w http.ResponseWriter, r *http.Request) {
				started <- struct{}{}
				select {
				case <-r.Context().Done():
					aborted <- struct{}{}
				case <-time.After(2 * time.Second):
					w.WriteHeader(http.StatusOK)
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			} else {
				go func() {
					<-started
					cancel()
				}()
			}

			start := time.Now()
			err := newWebhook(t, srv.URL).Handle(ctx, &executor.Task{ID: 9, Type: "slow", Attempt: 1})
			require.Less(t, time.Since(start), time.Second)
			require.ErrorIs(t, err, tc.wantErr)
			require.False(t, executor.IsPermanent(err))
			select {
			case <-aborted:
			case <-time.After(time.Second):
				t.Fatal("the receiver did not see the request aborted")
			}
		})
	}
}

func TestWebhookConfigInvalid(t *testing.T) {
	tests := []struct {
		name   string
		url    string
		secret []byte
		want   string
	}{
		{"relative URL", "/hook", webhookSecret, "absolute"},
		{"no scheme", "example.com/hook", webhookSecret, "absolute"},
		{"other scheme", "ftp://example.com/hook", webhookSecret, "http"},
		{"no host", "http:///hook", webhookSecret, "host"},
		{"empty URL", "", webhookSecret, "absolute"},
		{"unparsable URL", "http://exa mple.com", webhookSecret, "parse"},
		{"short secret", "https://example.com/hook", []byte("0123456789abcde"), "at least 16"},
		{"no secret", "https://example.com/hook", nil, "at least 16"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := executor.Webhook(executor.WebhookConfig{URL: tc.url, Secret: tc.secret})
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, h)
		})
	}
	_, err := executor.Webhook(executor.WebhookConfig{URL: "https://user:pw@example.com/hook?token=t0k", Secret: []byte("short")})
	require.NotContains(t, err.Error(), "pw")
	require.NotContains(t, err.Error(), "t0k")
}

// signedCall captures one real call of the handler, made at webhookNow.
func signedCall(t *testing.T) delivery {
	t.Helper()
	srv, seen := receiver(t, webhookSecret, func(w http.ResponseWriter, _ *http.Request) {})
	require.NoError(t, newWebhook(t, srv.URL).Handle(context.Background(),
		&executor.Task{ID: 42, Type: "t", Attempt: 3, Payload: json.RawMessage(`{"amount":100}`)}))
	d := <-seen
	require.NoError(t, d.err)
	return d
}

func TestVerifyWebhook(t *testing.T) {
	call := signedCall(t)
	sig := call.header.Get("Ax-Signature")
	tests := []struct {
		name    string
		secret  []byte
		mutate  func(h http.Header, body string) string
		now     time.Time
		maxSkew time.Duration
		wantErr error
	}{
		{name: "authentic", now: webhookNow},
		{name: "authentic, within skew", now: webhookNow.Add(59 * time.Second), maxSkew: time.Minute},
		{name: "default skew of five minutes", now: webhookNow.Add(4 * time.Minute)},
		{name: "replayed after max skew", now: webhookNow.Add(61 * time.Second), maxSkew: time.Minute, wantErr: executor.ErrWebhookTimestamp},
		{name: "replayed after default skew", now: webhookNow.Add(6 * time.Minute), wantErr: executor.ErrWebhookTimestamp},
		{name: "from the future", now: webhookNow.Add(-2 * time.Minute), maxSkew: time.Minute, wantErr: executor.ErrWebhookTimestamp},
		{name: "tampered body", now: webhookNow, wantErr: executor.ErrWebhookSignature,
			mutate: func(_ http.Header, body string) string { return strings.Replace(body, "100", "900", 1) }},
		{name: "timestamp moved forward", now: webhookNow.Add(10 * time.Minute), wantErr: executor.ErrWebhookSignature,
			mutate: func(h http.Header, body string) string {
				h.Set("Ax-Timestamp", strconv.FormatInt(webhookNow.Add(10*time.Minute).Unix(), 10))
				return body
			}},
		{name: "wrong secret", secret: webhookOtherSecret, now: webhookNow, wantErr: executor.ErrWebhookSignature},
		{name: "no signature", now: webhookNow, wantErr: executor.ErrWebhookSignature,
			mutate: func(h http.Header, body string) string { h.Del("Ax-Signature"); return body }},
		{name: "signature without scheme", now: webhookNow, wantErr: executor.ErrWebhookSignature,
			mutate: func(h http.Header, body string) string {
				h.Set("Ax-Signature", strings.TrimPrefix(sig, "v1="))
				return body
			}},
		{name: "signature under unknown scheme", now: webhookNow, wantErr: executor.ErrWebhookSignature,
			mutate: func(h http.Header, body string) string {
				h.Set("Ax-Signature", "v2"+strings.TrimPrefix(sig, "v1"))
				return body
			}},
		{name: "unknown scheme next to v1 is ignored", now: webhookNow,
			mutate: func(h http.Header, body string) string { h.Set("Ax-Signature", "v2=abc, "+sig); return body }},
		{name: "no timestamp", now: webhookNow, wantErr: executor.ErrWebhookTimestamp,
			mutate: func(h http.Header, body string) string { h.Del("Ax-Timestamp"); return body }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, body := call.header.Clone(), string(call.body)
			if tc.mutate != nil {
				body = tc.mutate(h, body)
			}
			secret := webhookSecret
			if tc.secret != nil {
				secret = tc.secret
			}
			r := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
			r.Header = h
			got, err := executor.VerifyWebhook(secret, r, tc.maxSkew, tc.now)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, body, string(got))
			again, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			require.Equal(t, body, string(again), "the body stays readable after verification")
		})
	}
}
