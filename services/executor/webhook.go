package executor

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/services/internal/tracing"
)

// HTTP headers of a webhook call. Receivers read the task's identity from
// them without parsing the body, and verify the body with the last two (see
// VerifyWebhook and docs/executors.md).
const (
	WebhookHeaderTaskID    = "Ax-Task-Id"
	WebhookHeaderAttempt   = "Ax-Task-Attempt"
	WebhookHeaderTimestamp = "Ax-Timestamp"
	WebhookHeaderSignature = "Ax-Signature"
)

// Limits of the webhook protocol.
const (
	// WebhookMinSecretLen is the shortest accepted secret: shorter keys make
	// the HMAC guessable offline from a single captured request.
	WebhookMinSecretLen = 16
	// WebhookMaxSkewDefault is the tolerance VerifyWebhook applies when given
	// none: wide enough for ordinary clock drift and retries in flight,
	// narrow enough that a captured request soon stops being replayable.
	WebhookMaxSkewDefault = 5 * time.Minute
	// WebhookMaxBody is the largest request body VerifyWebhook reads: the
	// largest payload MySQL can hold (16 MiB) plus room for the envelope, so
	// an unauthenticated sender cannot make a receiver buffer without bound.
	WebhookMaxBody = 16<<20 + 64<<10

	webhookSignatureScheme = "v1"
	webhookMaxResponse     = 64 << 10 // bytes of any response read
	webhookMaxErrorBody    = 512      // bytes of a response quoted in an error
)

// Errors VerifyWebhook wraps, so a receiver can tell a forged or corrupted
// request from a stale or replayed one.
var (
	ErrWebhookSignature = errors.New("webhook signature invalid")
	ErrWebhookTimestamp = errors.New("webhook timestamp invalid")
)

// WebhookConfig binds a task type to an HTTP endpoint.
type WebhookConfig struct {
	// URL receives one POST per attempt; it must be absolute http or https.
	URL string
	// Secret keys the HMAC-SHA256 signature of every call; at least
	// WebhookMinSecretLen bytes, shared with the receiver only.
	Secret []byte
	// Client sends the calls. The default has no overall timeout, because
	// the task's context deadline bounds each call, and does not follow
	// redirects, so a signed request never reaches a host nobody configured.
	Client *http.Client
	// Clock stamps each call; time.Now by default.
	Clock func() time.Time
}

// WebhookStatusError is the failure of a call the endpoint answered with a
// status other than 2xx; Webhook wraps it in Permanent when retrying cannot
// help, so callers composing handlers can branch on the status.
type WebhookStatusError struct {
	// Target is the endpoint without credentials, query or fragment.
	Target     string
	StatusCode int
	// Body is the start of the response body, at most 512 bytes.
	Body string
}

// Error names the endpoint, the status and the start of the answer, which
// is what an operator reading last_error needs to act.
func (e *WebhookStatusError) Error() string {
	msg := fmt.Sprintf("webhook %s answered %d %s", e.Target, e.StatusCode, http.StatusText(e.StatusCode))
	if e.StatusCode >= 300 && e.StatusCode < 400 {
		msg += " (redirects are not followed; set the URL to the final address)"
	}
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// webhook is the Handler Webhook returns.
type webhook struct {
	url    string
	target string // url as shown in errors: no credentials, query or fragment
	secret []byte
	client *http.Client
	clock  func() time.Time
}

// Webhook returns a Handler that runs each task by POSTing it, signed, to
// cfg.URL, so a service written in any language can execute a task type.
// 2xx is success; other 4xx than 408 and 429 fail the task permanently;
// 408, 429, 5xx, network errors and the task's deadline fail it retryably.
func Webhook(cfg WebhookConfig) (Handler, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the raw URL may carry credentials
		}
		return nil, fmt.Errorf("webhook config: URL does not parse: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook config: URL must be absolute http:// or https:// with a host, got %q", webhookTarget(u))
	}
	if len(cfg.Secret) < WebhookMinSecretLen {
		return nil, fmt.Errorf("webhook config: secret is %d bytes, want at least %d", len(cfg.Secret), WebhookMinSecretLen)
	}
	w := &webhook{
		url:    u.String(),
		target: webhookTarget(u),
		secret: bytes.Clone(cfg.Secret), // the caller may reuse its slice
		client: cfg.Client,
		clock:  cfg.Clock,
	}
	if w.client == nil {
		w.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
	}
	if w.clock == nil {
		w.clock = time.Now
	}
	return w, nil
}

// Handle delivers t and maps the answer to success, a retryable failure or a
// permanent one.
func (w *webhook) Handle(ctx context.Context, t *Task) error {
	body, err := webhookBody(t)
	if err != nil {
		return Permanent(fmt.Errorf("webhook %s: encode task %d: %w", w.target, t.ID, err))
	}
	ts := strconv.FormatInt(w.clock().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: build request: %w", w.target, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(WebhookHeaderTaskID, strconv.FormatInt(t.ID, 10))
	req.Header.Set(WebhookHeaderAttempt, strconv.Itoa(t.Attempt))
	req.Header.Set(WebhookHeaderTimestamp, ts)
	req.Header.Set(WebhookHeaderSignature, webhookSignatureScheme+"="+hex.EncodeToString(webhookMAC(w.secret, ts, body)))
	if tp := tracing.Current(ctx); tp != "" {
		// The endpoint's spans join the task's trace.
		req.Header.Set(tracing.Header, tp)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its URL would repeat the query string, which may hold a token
		}
		return fmt.Errorf("webhook %s: %w", w.target, err)
	}
	defer resp.Body.Close()
	return w.outcome(ctx, resp)
}

// outcome maps an answer to nil, a retryable error or a permanent one.
func (w *webhook) outcome(ctx context.Context, resp *http.Response) error {
	// Reading the (bounded) body lets the connection be reused and gives a
	// failure its explanation; a 2xx whose body breaks off is still a 2xx.
	// One byte past the limit tells a whole body from a cut one.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, webhookMaxResponse+1))
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		keepWebhookResult(ctx, resp, answer)
		return nil
	}
	serr := &WebhookStatusError{Target: w.target, StatusCode: code, Body: webhookQuote(answer)}
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return serr
	case code >= 300 && code < 500:
		// The receiver refused this request (or, for 3xx, the URL points at
		// the wrong place); sending the same bytes again cannot succeed.
		return Permanent(serr)
	default:
		return serr
	}
}

// keepWebhookResult keeps a 2xx answer's body as the task's result when it
// is JSON (Content-Type application/json, valid, at most 64 KiB); any other
// body is ignored, as it always was, so a receiver that answers with text
// or nothing still succeeds.
func keepWebhookResult(ctx context.Context, resp *http.Response, body []byte) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/json" || len(body) == 0 || len(body) > webhookMaxResponse || !json.Valid(body) {
		return
	}
	// Outside an executor (a handler's unit test) there is nowhere to keep it.
	_ = SetResult(ctx, json.RawMessage(body))
}

// webhookBody encodes the task as the documented JSON object. The payload
// goes out byte-for-byte apart from insignificant whitespace: no HTML
// escaping, and null when the task has none.
func webhookBody(t *Task) ([]byte, error) {
	payload := t.Payload
	if len(payload) == 0 {
		payload = nil // RawMessage encodes nil as null but an empty slice as an error
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		ID      string          `json:"id"`
		Type    string          `json:"type"`
		Attempt int             `json:"attempt"`
		Payload json.RawMessage `json:"payload"`
	}{strconv.FormatInt(t.ID, 10), t.Type, t.Attempt, payload})
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// webhookMAC is HMAC-SHA256 over "<timestamp>.<body>": binding the timestamp
// into the MAC is what makes the freshness check unforgeable.
func webhookMAC(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// VerifyWebhook authenticates a webhook call for a receiver written in Go:
// it checks the Ax-Signature against secret in constant time and that
// Ax-Timestamp is within maxSkew of now (WebhookMaxSkewDefault when maxSkew
// is not positive), and returns the body. r.Body is replaced by a reader over
// the same bytes, so a receiver rotating secrets may call it again with the
// other one. Failures wrap ErrWebhookSignature or ErrWebhookTimestamp.
func VerifyWebhook(secret []byte, r *http.Request, maxSkew time.Duration, now time.Time) ([]byte, error) {
	if len(secret) < WebhookMinSecretLen {
		return nil, fmt.Errorf("verify webhook: secret is %d bytes, want at least %d", len(secret), WebhookMinSecretLen)
	}
	if maxSkew <= 0 {
		maxSkew = WebhookMaxSkewDefault
	}
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, WebhookMaxBody+1))
		if err != nil {
			return nil, fmt.Errorf("verify webhook: read body: %w", err)
		}
		if len(body) > WebhookMaxBody {
			return nil, fmt.Errorf("verify webhook: body over %d bytes", WebhookMaxBody)
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	tsText := r.Header.Get(WebhookHeaderTimestamp)
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q is not Unix seconds", ErrWebhookTimestamp, WebhookHeaderTimestamp, tsText)
	}
	if !webhookSignatureMatches(r.Header.Get(WebhookHeaderSignature), webhookMAC(secret, tsText, body)) {
		return nil, fmt.Errorf("%w: no %s=<hex> entry of %s matches the body", ErrWebhookSignature, webhookSignatureScheme, WebhookHeaderSignature)
	}
	// Checked after the signature, so only authentic requests learn how far
	// off their clock is.
	if skew := now.Sub(time.Unix(ts, 0)); skew > maxSkew || skew < -maxSkew {
		return nil, fmt.Errorf("%w: %s is %s away from now, over the allowed %s", ErrWebhookTimestamp, WebhookHeaderTimestamp, skew.Abs().Round(time.Second), maxSkew)
	}
	return body, nil
}

// webhookSignatureMatches reports whether any v1 entry of a comma-separated
// signature header equals want. Entries of other schemes are skipped, so a
// future scheme can be sent alongside v1 without breaking receivers.
func webhookSignatureMatches(header string, want []byte) bool {
	ok := false
	for entry := range strings.SplitSeq(header, ",") {
		scheme, sig, found := strings.Cut(strings.TrimSpace(entry), "=")
		if !found || scheme != webhookSignatureScheme {
			continue
		}
		got, err := hex.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			ok = true // no early return: the time taken does not depend on which entry matched
		}
	}
	return ok
}

// webhookQuote renders the start of a response body for an error text: at
// most webhookMaxErrorBody bytes, cut on a rune boundary, Go-quoted so that
// control characters and invalid UTF-8 cannot reach logs or MySQL raw.
func webhookQuote(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	more := ""
	if len(b) > webhookMaxErrorBody {
		cut := webhookMaxErrorBody
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		b, more = b[:cut], "..."
	}
	return strconv.Quote(string(b)) + more
}

// webhookTarget is u as errors show it: without user info, query or fragment,
// which are where credentials and tokens live.
func webhookTarget(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	return c.String()
}
