package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/internal/gctune"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "ax",
		Short:         "ax: a distributed asynchronous task scheduler",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServerCmd("up", "Run all five services in one process with an embedded NATS JetStream server", app.AllServices, true))
	for _, s := range app.AllServices {
		root.AddCommand(newServerCmd(string(s), "Run the "+string(s)+" service against an external NATS server", []app.Service{s}, false))
	}
	root.AddCommand(newMigrateCmd(), newKeyCmd(), newTaskCmd(), newWorkflowCmd(), newLineageCmd(), newDLQCmd(), newTypeCmd(), newRolloutCmd(), newNodesCmd(), newStatsCmd(), newWhoAmICmd(), newScheduleCmd(), newBenchCmd(), newNATSConfigCmd(), newVersionCmd())
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command group (ax task, ax dlq...)
// fail on a subcommand it does not have, instead of printing its help and
// exiting 0 as cobra does for a command that cannot run: a script that
// calls a misspelt or missing subcommand must see an error.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		refuseUnknownSubcommands(c)
	}
	if cmd.Runnable() || !cmd.HasSubCommands() || cmd.Parent() == nil {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return fmt.Errorf("unknown command %q for %q; run %q", args[0], cmd.CommandPath(), cmd.CommandPath()+" --help")
	}
}

func newServerCmd(name, short string, services []app.Service, embedded bool) *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := f.logger()
			if err != nil {
				return err
			}
			if f.gcFloorMiB < 0 {
				return fmt.Errorf("--gc-floor-mib %d is negative: give 0 to leave the garbage collector to Go's defaults", f.gcFloorMiB)
			}
			go gctune.Run(cmd.Context(), uint64(f.gcFloorMiB)<<20, logger)
			cfg := f.cfg
			if err := f.resolveSecrets(cmd.Flags(), &cfg); err != nil {
				return err
			}
			cfg.EmbeddedNATS = embedded
			cfg.Embedded.StoreDir = filepath.Join(f.dataDir, "nats")
			types, err := f.executorTypes()
			if err != nil {
				return err
			}
			cfg.Types = faultSlower(types, logger)
			cfg.NATSTypes = f.natsTypes()
			cfg.Executor.AfterLease = faultKillAfterLease(logger)
			cfg.Executor.HeartbeatInterval = f.heartbeat
			cfg.Executor.ClaimAfter = f.claimAfter
			cfg.Executor.SendReleased = !f.runReleasedHere
			if f.claimAfter <= 0 {
				cfg.Executor.ClaimAfter = -1 // the flag's 0: no window
			}
			if cfg.MySQLPreparedStatements = f.preparedStatements; f.preparedStatements == 0 {
				cfg.MySQLPreparedStatements = -1 // the flag's 0: none
			} else if f.preparedStatements < 0 {
				return fmt.Errorf("--mysql-prepared-statements %d is negative: give 0 to prepare none", f.preparedStatements)
			}
			cfg.Reaper.HeartbeatInterval = f.heartbeat
			cfg.Relay.NoGapTracking = !f.relayGapTracking
			cfg.WorkflowStepsInTable = !f.workflowStepsOnRow
			stopProfile, err := startCPUProfile(f.cpuProfile)
			if err != nil {
				return err
			}
			return errors.Join(app.Run(cmd.Context(), cfg, services, logger), stopProfile())
		},
	}
	f.register(cmd.Flags(), name)
	return cmd
}
