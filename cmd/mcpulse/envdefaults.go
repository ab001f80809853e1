package main

import (
	"os"
	"regexp"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envVarInUsage finds the environment variables a flag's usage names as its default
// ("default $MCPULSE_CLICKHOUSE_DSN").
var envVarInUsage = regexp.MustCompile(`\$\{?([A-Z][A-Z0-9_]*)`)

// hideEnvironmentDefaults keeps --help from printing the values of the environment variables
// flags default to: those hold DSNs, Redis URLs with passwords and API keys, and help output
// ends up in terminals, logs and bug reports. A flag whose default is the value of a variable
// its usage names keeps that value but shows only the variable's name (cobra would otherwise
// append `(default "clickhouse://user:secret@...")`).
func hideEnvironmentDefaults(root *cobra.Command) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		hide := func(f *pflag.Flag) {
			if f.DefValue == "" {
				return
			}
			for _, m := range envVarInUsage.FindAllStringSubmatch(f.Usage, -1) {
				if v, ok := os.LookupEnv(m[1]); ok && v != "" && v == f.DefValue {
					f.DefValue = ""
					return
				}
			}
		}
		c.LocalFlags().VisitAll(hide)
		c.PersistentFlags().VisitAll(hide)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
