package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newNodesCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use: "nodes", Short: "Show executor nodes: liveness, last heartbeat, running tasks and shards", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := f.client().ListNodes(cmd.Context())
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), l, func() {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NODE\tVERSION\tALIVE\tLAST HEARTBEAT\tRUNNING\tCAPACITY\tSHARDS\tTYPES\tADDR")
				for _, n := range l.Nodes {
					fmt.Fprintf(tw, "%s\t%s\t%t\t%s ago\t%d\t%d\t%s\t%s\t%s\n", n.Name, n.Version, n.Alive,
						time.Since(n.LastHeartbeat).Round(100*time.Millisecond), len(n.Running), n.Capacity,
						shardCounts(n.Types, n.Shards), strings.Join(n.Types, ","), n.Addr)
				}
				tw.Flush()
			})
		},
	}
	f.register(cmd)
	return cmd
}

// shardCounts says how many shards the node owns per type, in the order of
// its types ("28/28/64"); -o json shows which.
func shardCounts(types []string, shards map[string][]int) string {
	counts := make([]string, len(types))
	for i, t := range types {
		counts[i] = strconv.Itoa(len(shards[t]))
	}
	return strings.Join(counts, "/")
}
