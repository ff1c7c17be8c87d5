// Package prometheus holds ax's Prometheus alert rules (alerts.yml), their
// unit tests (alerts_test.yml), and what the tests share to run promtool.
package prometheus

import (
	"os"
	"os/exec"
	"testing"
)

// Promtool finds promtool (Debian's prometheus package; `make tools`
// installs it) for a test. In CI its absence fails the test, elsewhere it
// skips it.
func Promtool(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is missing: run `make tools`")
		}
		t.Skip("promtool is missing: run `make tools`")
	}
	return path
}
