package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newWhoAmICmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Name the API key this CLI uses, and its role",
		Long: `Name the API key the CLI sends (AX_TOKEN_FILE or AX_TOKEN) and its role, as
the server sees them: what changes made with it are recorded under. A server
that checks no keys says so. Needs a key with the read role or more.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client().WhoAmI(cmd.Context())
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), c, func() {
				if !c.Auth {
					fmt.Fprintln(cmd.OutOrStdout(), "no key: this ax checks no API keys (bound to loopback with none, or --auth off)")
					return
				}
				fmt.Fprintf(cmd.OutOrStdout(), "key %s, role %s\n", c.Name, c.Role)
			})
		},
	}
	f.register(cmd)
	return cmd
}
