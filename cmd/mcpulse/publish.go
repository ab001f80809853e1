package main

import "github.com/spf13/cobra"

func newPublishCmd() *cobra.Command {
	return &cobra.Command{Use: "publish", Short: "TODO", Hidden: true}
}
