package main

import (
	"github.com/spf13/cobra"

	"github.com/axsched/ax/services/internal/natsperm"
)

func newNATSConfigCmd() *cobra.Command {
	var account string
	cmd := &cobra.Command{
		Use:   "nats-config",
		Short: "Print the nats-server accounts block with one user per ax service and its permissions",
		Long: `Prints a nats-server configuration block: an account with JetStream and one
user per service (ax-submitter, ax-timer, ax-dispatcher, ax-executor,
ax-reaper, and ax-up for the one-process ax up), each allowed to publish and
subscribe only to the subjects, JetStream API included, that its service
uses. Passwords are not in it: nats-server reads them from its environment
(AX_NATS_PASSWORD_SUBMITTER, ...). Include the block from the server's
configuration, then run each service with --nats-user ax-<service> and its
password in AX_NATS_PASSWORD or --nats-password-file.`,
		Example: `  ax nats-config > ax-users.conf
  # nats-server.conf: jetstream { store_dir: /data } ... include ax-users.conf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return natsperm.WriteConfig(cmd.OutOrStdout(), account)
		},
	}
	cmd.Flags().StringVar(&account, "account", "AX", "name of the NATS account holding ax's streams and users")
	return cmd
}
