package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newBenchDashboardsCmd is filled in by the dashboards benchmark (issue 6).
func newBenchDashboardsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "dashboards",
		Short:  "Dashboard panel query latency (not built yet)",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("bench dashboards is not built yet") },
	}
}
