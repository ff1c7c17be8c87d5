package services

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const modPrefix = "github.com/axsched/ax/"

// The floors of the import graph, lowest first. A package belongs to the
// first floor naming it: "x/" names what is below x, "=x" names x alone,
// and "x" names x and what is below it.
var floors = []struct {
	name     string
	prefixes []string
}{
	{"contracts and infra", []string{"contracts", "infra"}},
	{"events", []string{"events"}},
	{"shared runtime", []string{"services/internal/"}},
	{"the five services", []string{"services/submitter", "services/timer", "services/dispatcher", "services/executor", "services/reaper"}},
	{"wiring and tools", []string{"services/cmd/", "services/app", "services/bench", "services/demo", "services/worker", "services/examples/", "services/chaos", "=services"}},
}

func floorOf(pkg string) (floor int, unit string) {
	rel := strings.TrimPrefix(pkg, modPrefix)
	for i, f := range floors {
		for _, p := range f.prefixes {
			var match bool
			switch {
			case strings.HasPrefix(p, "="):
				match = rel == p[1:]
			case strings.HasSuffix(p, "/"):
				match = strings.HasPrefix(rel, p)
			default:
				match = rel == p || strings.HasPrefix(rel, p+"/")
			}
			if match {
				return i, p
			}
		}
	}
	return -1, ""
}

// checkImports returns one line per import that runs upwards, crosses from
// one service to another, or names a package on no floor.
func checkImports(graph map[string][]string) []string {
	var bad []string
	for pkg, imports := range graph {
		from, fromUnit := floorOf(pkg)
		if from < 0 {
			bad = append(bad, pkg+" is on no floor: add it to the floors of services/layers_test.go and docs/architecture.md")
			continue
		}
		for _, imp := range imports {
			if !strings.HasPrefix(imp, modPrefix) {
				continue
			}
			to, toUnit := floorOf(imp)
			switch {
			case to < 0:
				bad = append(bad, imp+" is on no floor")
			case to > from:
				bad = append(bad, pkg+" ("+floors[from].name+") imports "+imp+" ("+floors[to].name+"), a floor above it")
			case from == 3 && to == 3 && fromUnit != toUnit:
				bad = append(bad, pkg+" imports "+imp+": services talk over NATS, never through each other's code")
			}
		}
	}
	return bad
}

func TestImportsRunDownwards(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`,
		"./contracts/...", "./events/...", "./infra/...", "./services/...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		graph[fields[0]] = fields[1:]
	}
	require.Greater(t, len(graph), 20, "go list found too few packages to judge")
	require.Empty(t, checkImports(graph))
}

// TestImportCheckCatchesWrongDirections: the check is not vacuous.
func TestImportCheckCatchesWrongDirections(t *testing.T) {
	tests := []struct {
		name  string
		graph map[string][]string
		bad   bool
	}{
		{"service on runtime", map[string][]string{modPrefix + "services/timer": {modPrefix + "services/internal/store"}}, false},
		{"wiring on services", map[string][]string{modPrefix + "services/app": {modPrefix + "services/timer", modPrefix + "events"}}, false},
		{"runtime on a service", map[string][]string{modPrefix + "services/internal/outbox": {modPrefix + "services/executor"}}, true},
		{"runtime on wiring", map[string][]string{modPrefix + "services/internal/store": {modPrefix + "services/app"}}, true},
		{"service on service", map[string][]string{modPrefix + "services/reaper": {modPrefix + "services/executor"}}, true},
		{"events on runtime", map[string][]string{modPrefix + "events": {modPrefix + "services/internal/bus"}}, true},
		{"contracts on events", map[string][]string{modPrefix + "contracts/client": {modPrefix + "events"}}, true},
		{"unknown package", map[string][]string{modPrefix + "services/newthing": {}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.bad, len(checkImports(tt.graph)) > 0, "%v", checkImports(tt.graph))
		})
	}
}
