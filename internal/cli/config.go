package cli

import (
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/contextd/contextd/internal/app"
)

// newConfig is `contextd config check`: the configuration serve would run
// with, resolved and validated the same way, printed with its secrets
// masked.
func newConfig() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Inspect the server's configuration"}
	var cfg app.Config
	check := &cobra.Command{
		Use:   "check",
		Short: "Print the effective configuration of `serve` (secrets masked) and fail naming an invalid setting",
		Long: "Resolves the settings as `serve` does — flags, then the environment, then --config FILE (YAML or TOML), " +
			"then the defaults — prints them with passwords in URLs and keys masked, and exits non-zero naming each invalid setting.",
		Example: `  contextd config check --config contextd.toml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := cfg.Validate()
			if werr := cfg.WriteEffective(cmd.OutOrStdout()); werr != nil {
				return werr
			}
			return err
		},
	}
	cfg.RegisterFlags(check.Flags())
	cmd.AddCommand(check)
	return cmd
}

// buildVersion is the module version the binary was built from.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
