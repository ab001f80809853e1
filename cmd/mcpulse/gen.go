package main

import "github.com/spf13/cobra"

func newGenCmd() *cobra.Command {
	return &cobra.Command{Use: "gen", Short: "TODO", Hidden: true}
}
