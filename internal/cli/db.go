package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/contextd/contextd/internal/auth"
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDB(cmd, &db, func(ctx context.Context, url string) error {
				return store.MigrateDown(ctx, url)
			})
		}}
	status := &cobra.Command{Use: "status", Short: "List migrations and whether each is applied", Args: cobra.NoArgs,
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

func newAgents() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "Manage agents"}
	var (
		db                                     dbFlags
		name, role, permission, projs, maxAuth string
		keyFile                                string
		asJSON                                 bool
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an agent straight in the database and print its key once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := localKeys(keyFile, db)
			if err != nil {
				return err
			}
			return withDB(cmd, &db, func(ctx context.Context, url string) error {
				if err := store.MigrateUp(ctx, url); err != nil {
					return err
				}
				st, err := store.Open(ctx, store.Config{URL: url})
				if err != nil {
					return err
				}
				defer st.Close()
				if keys != nil {
					st.SealWith(keys.Seal) // the agent's entry in the global chain, as serve would seal it
				} else {
					fmt.Fprintln(cmd.ErrOrStderr(), "contextd: no audit key (--audit-key-file or CONTEXTD_AUDIT_KEY): the agent's entry is not sealed, and verify reports the global chain unsealed until `contextd audit adopt`")
				}
				var projects []string
				for _, p := range strings.Split(projs, ",") {
					if p = strings.TrimSpace(p); p != "" {
						projects = append(projects, p)
					}
				}
				a, key, err := auth.NewService(st).CreateLocal(ctx, auth.CreateParams{
					Name: name, Role: role, Permission: auth.Permission(permission), Projects: projects, MaxAuthority: maxAuth,
				})
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON {
					return json.NewEncoder(out).Encode(map[string]any{
						"id": a.ID, "name": a.Name, "role": a.Role, "permission": a.Permission, "projects": a.Projects,
						"max_authority": a.MaxAuthority, "key": key,
					})
				}
				fmt.Fprintf(out, "agent %s (%s, role %s, %s on %s, authority up to %s)\nkey (shown once): %s\n",
					a.ID, a.Name, a.Role, a.Permission, strings.Join(a.Projects, ","), a.MaxAuthority, key)
				return nil
			})
		},
	}
	db.register(create)
	create.Flags().StringVar(&name, "name", "", "agent name")
	create.Flags().StringVar(&role, "role", "", "agent role: planner, implementer, critic, reviewer, ...")
	create.Flags().StringVar(&permission, "permission", "read-only", "read-only, edit or admin")
	create.Flags().StringVar(&projs, "projects", "", "comma-separated projects, or *")
	create.Flags().StringVar(&maxAuth, "max-authority", "", "highest authority the agent's items may claim: policy, instruction, evidence or hypothesis (default: policy for admins, instruction otherwise)")
	create.Flags().StringVar(&keyFile, "audit-key-file", os.Getenv("CONTEXTD_AUDIT_KEY_FILE"), "the audit key, to seal the agent's entry (env CONTEXTD_AUDIT_KEY_FILE or CONTEXTD_AUDIT_KEY; default: the embedded default's audit.key)")
	create.Flags().BoolVar(&asJSON, "json", false, "print {id,name,role,permission,projects,max_authority,key} as JSON")
	cmd.AddCommand(create)
	cmd.AddCommand(agentsRemote()...)
	return cmd
}
