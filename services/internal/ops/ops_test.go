package ops_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/ops"
	"github.com/axsched/ax/services/internal/testenv"
)

// start runs a server with cfg on a loopback port until the test ends.
func start(t *testing.T, cfg ops.Config, routes func(*http.ServeMux)) string {
	t.Helper()
	srv := ops.New("127.0.0.1:0", cfg, testenv.Logger(t))
	routes(srv.Mux)
	require.NoError(t, srv.Listen())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return srv.Addr()
}

// requireClosedByServer reads conn until the server closes it, failing if
// that takes longer than a generous deadline.
func requireClosedByServer(t *testing.T, conn net.Conn) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(15*time.Second)))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open: %v", err)
}

func TestTrickledBodyIsCutByReadTimeout(t *testing.T) {
	bodyErr := make(chan error, 1)
	addr := start(t, ops.Config{ReadTimeout: 300 * time.Millisecond}, func(mux *http.ServeMux) {
		mux.HandleFunc("POST /v1/echo", func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			bodyErr <- err
		})
	})
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /v1/echo HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n", addr)
	require.NoError(t, err)
	// 50 bytes, one every 100 ms: 5 s in all, far past the read timeout.
	go func() {
		for range 50 {
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	select {
	case err := <-bodyErr:
		require.Error(t, err, "the whole trickled body was read")
	case <-time.After(15 * time.Second):
		t.Fatal("the handler is still reading the trickled body")
	}
	requireClosedByServer(t, conn)
}

func TestIdleKeepAliveIsClosed(t *testing.T) {
	addr := start(t, ops.Config{IdleTimeout: 200 * time.Millisecond}, func(*http.ServeMux) {})
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /livez HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, resp.Close, "the server should keep the connection alive after one request")
	requireClosedByServer(t, conn)
}

func TestConfigRejectsNegativeTimeouts(t *testing.T) {
	cfg := ops.Config{IdleTimeout: -time.Second}
	require.Error(t, cfg.Validate())
	srv := ops.New("127.0.0.1:0", cfg, testenv.Logger(t))
	require.Error(t, srv.Run(context.Background()))
}
