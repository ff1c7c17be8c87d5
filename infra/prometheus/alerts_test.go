package prometheus

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The rules load, and their unit tests (alerts_test.yml) pass.
func TestAlertRules(t *testing.T) {
	bin := Promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every alert names a runbook section that exists: a heading of
// docs/operations.md, by the anchor GitHub gives it.
func TestAlertRunbooksExist(t *testing.T) {
	anchors := headingAnchors(t, "../../docs/operations.md")
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(rules), -1)
	links := regexp.MustCompile(`(?m)^\s*runbook_url: "docs/operations\.md#([^"]+)"`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) == 0 || len(links) != len(alerts) {
		t.Fatalf("%d alerts but %d runbook_url links to docs/operations.md: every alert needs one", len(alerts), len(links))
	}
	for i, l := range links {
		if !anchors[l[1]] {
			t.Errorf("alert %s links to #%s, which is no heading of docs/operations.md", alerts[i][1], l[1])
		}
	}
}

// headingAnchors returns the anchors of a Markdown file's headings.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	fence := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		out[anchor(strings.TrimLeft(line, "# "))] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// anchor is the anchor GitHub gives a heading: lower case, punctuation
// dropped, spaces to hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
