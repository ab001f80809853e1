package main

import "github.com/spf13/cobra"

func newConsumeCmd() *cobra.Command {
	return &cobra.Command{Use: "consume", Short: "TODO", Hidden: true}
}
