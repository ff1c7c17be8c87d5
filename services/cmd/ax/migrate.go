package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/services/internal/store"
)

func newMigrateCmd() *cobra.Command {
	var (
		flags dsnFlags
		dsn   string
	)
	cmd := &cobra.Command{Use: "migrate", Short: "Apply or inspect the MySQL schema migrations (as a user allowed to change the schema)"}
	flags.register(cmd.PersistentFlags())
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) (err error) {
		dsn, err = flags.resolveTLS(cmd.Flags())
		return err
	}
	cmd.AddCommand(&cobra.Command{
		Use: "up", Short: "Apply every pending migration", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := store.Migrate(cmd.Context(), dsn); err != nil {
				return err
			}
			st, err := store.Status(cmd.Context(), dsn)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema at version %d (latest %d)\n", st.Version, st.Latest)
			return nil
		},
	}, newMigrateDownCmd(&dsn), &cobra.Command{
		Use: "status", Short: "Show the applied and the latest migration", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := store.Status(cmd.Context(), dsn)
			if err != nil {
				return err
			}
			state := "up to date"
			switch {
			case st.Dirty:
				state = "DIRTY: a migration failed half way; fix it by hand, then force the version"
			case st.Version < st.Latest:
				state = fmt.Sprintf("%d pending", st.Latest-st.Version)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "applied: %d\nlatest:  %d\nstate:   %s\n", st.Version, st.Latest, state)
			return nil
		},
	})
	return cmd
}

func newMigrateDownCmd(dsn *string) *cobra.Command {
	var to int
	cmd := &cobra.Command{
		Use:   "down --to VERSION",
		Short: "Revert migrations, newest first, down to VERSION (stop every service first)",
		Long: `Reverts applied migrations, newest first, until the schema is at VERSION
(0 removes every table of ax). Stop every ax service first. A migration's
.down.sql says what reverting it loses: 0007, for example, drops the events
of history rows the relay has not published yet.`,
		Example: "  ax migrate down --to 7",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("to") {
				return fmt.Errorf("--to is required: the version to go down to (see `ax migrate status`)")
			}
			if to < 0 {
				return fmt.Errorf("--to %d: a version is 0 or more", to)
			}
			if err := store.MigrateDownTo(cmd.Context(), *dsn, uint(to)); err != nil {
				return err
			}
			st, err := store.Status(cmd.Context(), *dsn)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema at version %d (latest %d)\n", st.Version, st.Latest)
			return nil
		},
	}
	cmd.Flags().IntVar(&to, "to", 0, "version to go down to (required)")
	return cmd
}
