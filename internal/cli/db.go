package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/contextd/contextd/internal/pgcluster"
	"github.com/contextd/contextd/internal/store"
)

// withDB runs fn on the database, stopping an embedded cluster afterwards
// only if this command started it.
func withDB(cmd *cobra.Command, db *dbFlags, fn func(ctx context.Context, url string) error) error {
	ctx := cmd.Context()
	url, cluster, err := db.open(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if cluster != nil && !cluster.Reused() {
		defer func(c *pgcluster.Cluster) { _ = c.Stop(context.WithoutCancel(ctx)) }(cluster)
	}
	return fn(ctx, url)
}

func newMigrate() *cobra.Command {
	var db dbFlags
	cmd := &cobra.Command{Use: "migrate", Short: "Apply, roll back or list schema migrations"}
	db.register(cmd)
	cmd.PersistentFlags().AddFlagSet(cmd.Flags())
	up := &cobra.Command{Use: "up", Short: "Apply every pending migration", Args: cobra.NoArgs,
		Example: "  contextd migrate up --database-url postgres://owner@db/contextd",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDB(cmd, &db, func(ctx context.Context, url string) error {
				if err := store.MigrateUp(ctx, url); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "schema is current")
				grants, err := store.AppGrants(ctx, url)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "privileges of %s (grant it to the server's login: GRANT %s TO <login>):\n", store.AppRole, store.AppRole)
				for _, g := range grants {
					fmt.Fprintln(cmd.OutOrStdout(), "  "+g)
				}
				return nil
			})
		}}
	down := &cobra.Command{Use: "down", Short: "Roll back the most recent migration", Args: cobra.NoArgs,
		Example: "  contextd migrate down --database-url postgres://owner@db/contextd",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDB(cmd, &db, func(ctx context.Context, url string) error {
				return store.MigrateDown(ctx, url)
			})
		}}
	status := &cobra.Command{Use: "status", Short: "List migrations and whether each is applied", Args: cobra.NoArgs,
		Example: "  contextd migrate status          # the embedded default's database",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDB(cmd, &db, func(ctx context.Context, url string) error {
				list, err := store.Migrations(ctx, url)
				if err != nil {
					return err
				}
				for _, s := range list {
					state := "pending"
					if s.Applied {
						state = "applied"
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%05d  %-8s %s\n", s.Version, state, s.Name)
				}
				return nil
			})
		}}
	cmd.AddCommand(up, down, status)
	return cmd
}
