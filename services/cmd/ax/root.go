package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/services/app"
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
	root.AddCommand(newMigrateCmd(), newKeyCmd(), newTaskCmd(), newDLQCmd(), newTypeCmd(), newNodesCmd(), newStatsCmd(), newWhoAmICmd(), newBenchCmd())
	return root
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
			cfg := f.cfg
			cfg.EmbeddedNATS = embedded
			types, err := f.executorTypes()
			if err != nil {
				return err
			}
			cfg.Types = types
			cfg.NATSTypes = f.natsTypes()
			cfg.Executor.AfterLease = faultKillAfterLease(logger)
			cfg.Executor.HeartbeatInterval = f.heartbeat
			cfg.Reaper.HeartbeatInterval = f.heartbeat
			cfg.Relay.NoGapTracking = !f.relayGapTracking
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
