package main

import (
	"fmt"
	"io/fs"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/infra/migrations"
	"github.com/axsched/ax/services/executor"
)

// versionInfo is what `ax version` prints: enough to tell two builds apart
// and to know which schema a binary expects.
type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"commit_time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	Schema   int    `json:"schema"`
}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, Go version and the schema version this binary migrates to",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := apiFlags{output: output}
			if err := f.validateOutput(); err != nil {
				return err
			}
			v := buildVersion()
			w := cmd.OutOrStdout()
			return f.print(w, v, func() {
				fmt.Fprintf(w, "ax %s\n", v.Version)
				if v.Commit != "" {
					mod := ""
					if v.Modified {
						mod = ", with uncommitted changes"
					}
					fmt.Fprintf(w, "commit %s (%s%s)\n", v.Commit, v.Time, mod)
				}
				fmt.Fprintf(w, "%s %s\nschema %d\n", v.Go, v.Platform, v.Schema)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func buildVersion() versionInfo {
	v := versionInfo{Version: executor.Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Schema: latestMigration()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

// latestMigration is the number of the newest embedded migration: the
// schema version `ax migrate up` brings a database to.
func latestMigration() int {
	latest := 0
	entries, _ := fs.ReadDir(migrations.FS, ".")
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), "_")
		if n, err := strconv.Atoi(num); err == nil && n > latest {
			latest = n
		}
	}
	return latest
}
