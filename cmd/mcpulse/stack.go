package main

import "github.com/spf13/cobra"

func newStackCmd() *cobra.Command {
	return &cobra.Command{Use: "stack", Short: "TODO", Hidden: true}
}
