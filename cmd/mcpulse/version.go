package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/internal/buildinfo"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print the mcpulse version, the commit it was built from and the Go toolchain",
		Long: `version prints which build of mcpulse this is: its release version (set at link time with
-ldflags "-X github.com/mcpulse/mcpulse/internal/buildinfo.Version=vX.Y.Z"; "(devel)" for a build
from a checkout), the commit and commit time Go recorded, whether the checkout had
uncommitted changes, and the Go toolchain and platform.`,
		Example: "  mcpulse version\n  mcpulse version --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Read()
			if asJSON {
				return newJSONEncoder(cmd.OutOrStdout()).Encode(info)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), info)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the build information as JSON")
	return cmd
}
