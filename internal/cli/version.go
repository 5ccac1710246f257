package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// newVersion is `contextd version`: the module version and the commit it
// was built from, as the Go toolchain recorded them.
func newVersion() *cobra.Command {
	return &cobra.Command{Use: "version", Short: "Print contextd's version", Args: cobra.NoArgs, Example: "  contextd version", RunE: func(cmd *cobra.Command, _ []string) error {
		version, commit, dirty := "(devel)", "", ""
		if bi, ok := debug.ReadBuildInfo(); ok {
			version = bi.Main.Version
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					commit = s.Value
				case "vcs.modified":
					if s.Value == "true" {
						dirty = " (modified)"
					}
				}
			}
		}
		fmt.Fprintf(cmd.OutOrStdout(), "contextd %s", version)
		if commit != "" {
			fmt.Fprintf(cmd.OutOrStdout(), " %s%s", commit, dirty)
		}
		fmt.Fprintln(cmd.OutOrStdout())
		return nil
	}}
}
