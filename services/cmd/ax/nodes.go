package main

import (
	"fmt"
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
				fmt.Fprintln(tw, "NODE\tALIVE\tLAST HEARTBEAT\tRUNNING\tCAPACITY\tSHARDS\tTYPES\tADDR")
				for _, n := range l.Nodes {
					fmt.Fprintf(tw, "%s\t%t\t%s ago\t%d\t%d\t%d\t%s\t%s\n", n.Name, n.Alive,
						time.Since(n.LastHeartbeat).Round(100*time.Millisecond), len(n.Running), n.Capacity,
						len(n.Shards), strings.Join(n.Types, ","), n.Addr)
				}
				tw.Flush()
			})
		},
	}
	f.register(cmd)
	return cmd
}
