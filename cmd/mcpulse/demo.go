package main

import "github.com/spf13/cobra"

func newDemoCmd() *cobra.Command {
	return &cobra.Command{Use: "demo", Short: "TODO", Hidden: true}
}
