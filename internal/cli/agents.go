package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/store"
)

func newAgents() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "Create, list, change and revoke agents (admin)"}
	cmd.AddCommand(agentCreate(), agentList(), agentRevoke(), agentUpdate())
	return cmd
}

// agentGrant are the members of a new agent.
type agentGrant struct {
	name, role, permission, projects, maxAuthority string
}

func (g agentGrant) projectList() []string {
	var projects []string
	for _, p := range strings.Split(g.projects, ",") {
		if p = strings.TrimSpace(p); p != "" {
			projects = append(projects, p)
		}
	}
	return projects
}

// agentCreate is `agents create`: through the API of a running server, or
// straight in the database (the first admin of a database no server has
// run on yet, or one whose admin key is lost): with --database-url or
// --data-dir, or when DATABASE_URL is set and no server is named (--url,
// CONTEXTD_URL, the client config's url).
func agentCreate() *cobra.Command {
	var (
		f       clientFlags
		db      dbFlags
		g       agentGrant
		keyFile string
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an agent and print its key once",
		Long: `create makes an agent and prints its key, once. It asks the running server
(an admin key), or, with --database-url or --data-dir (or DATABASE_URL set
and no server named by --url, CONTEXTD_URL or the client config), writes it
straight in the database: for the first admin of a database no server has
started on, or when every admin key is lost.`,
		Example: `  contextd agents create --name impl-1 --role implementer --permission edit --projects acme
  contextd agents create --name critic-1 --role critic --permission edit --projects acme --json
  contextd agents create --database-url postgres://... --name root --role admin --permission admin --projects '*'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			named, err := f.named()
			if err != nil {
				return err
			}
			flags := cmd.Flags()
			if flags.Changed("database-url") || flags.Changed("data-dir") || (os.Getenv("DATABASE_URL") != "" && !named) {
				return createInDatabase(cmd, &db, keyFile, g, f.json)
			}
			return createThroughAPI(cmd, &f, g)
		},
	}
	f.registerServer(create)
	f.registerJSON(create)
	db.register(create)
	fl := create.Flags()
	fl.StringVar(&g.name, "name", "", "agent name")
	fl.StringVar(&g.role, "role", "", "agent role: planner, implementer, critic, reviewer, ...")
	fl.StringVar(&g.permission, "permission", "read-only", "read-only, edit or admin")
	fl.StringVar(&g.projects, "projects", "", "comma-separated projects, or *")
	fl.StringVar(&g.maxAuthority, "max-authority", "", "highest authority the agent's items may claim: policy, instruction, evidence or hypothesis (default: policy for admins, instruction otherwise)")
	fl.StringVar(&keyFile, "audit-key-file", os.Getenv("CONTEXTD_AUDIT_KEY_FILE"), "with the database: the audit key, to seal the agent's entry (env CONTEXTD_AUDIT_KEY_FILE or CONTEXTD_AUDIT_KEY; default: the embedded default's audit.key)")
	return create
}

func createThroughAPI(cmd *cobra.Command, f *clientFlags, g agentGrant) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	body := apiclient.AgentCreate{Name: g.name, Role: g.role, Permission: g.permission, Projects: g.projectList()}
	if body.Projects == nil {
		body.Projects = []string{}
	}
	if g.maxAuthority != "" {
		m := apiclient.AgentCreateMaxAuthority(g.maxAuthority)
		body.MaxAuthority = &m
	}
	var a apiclient.AgentWithKey
	res, err := c.Raw().CreateAgent(cmd.Context(), &apiclient.CreateAgentParams{}, body)
	raw, _, err := c.answer(res, err, &a)
	if err != nil {
		return err
	}
	return f.show(cmd, raw, func(out io.Writer) {
		printNewAgent(out, a.Id, a.Name, a.Role, a.Permission, a.Projects, a.MaxAuthority, a.Key)
	})
}

func printNewAgent(out io.Writer, id, name, role, permission string, projects []string, maxAuthority, key string) {
	fmt.Fprintf(out, "agent %s (%s, role %s, %s on %s, authority up to %s)\nkey (shown once): %s\n",
		id, name, role, permission, strings.Join(projects, ","), maxAuthority, key)
}

// createInDatabase writes the agent straight in the database, sealing its
// entry with the audit key when one is at hand.
func createInDatabase(cmd *cobra.Command, db *dbFlags, keyFile string, g agentGrant, asJSON bool) error {
	keys, err := localKeys(keyFile, *db)
	if err != nil {
		return err
	}
	return withDB(cmd, db, func(ctx context.Context, url string) error {
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
		a, key, err := auth.NewService(st).CreateLocal(ctx, auth.CreateParams{
			Name: g.name, Role: g.role, Permission: auth.Permission(g.permission), Projects: g.projectList(), MaxAuthority: g.maxAuthority,
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
		printNewAgent(out, a.ID, a.Name, a.Role, string(a.Permission), a.Projects, a.MaxAuthority, key)
		return nil
	})
}

// allAgents pages through every agent.
func allAgents(ctx context.Context, c *client) ([]apiclient.Agent, error) {
	var all []apiclient.Agent
	limit, cursor := apiclient.Limit(1000), ""
	for {
		var page apiclient.AgentList
		res, err := c.Raw().ListAgents(ctx, &apiclient.ListAgentsParams{Limit: &limit, Cursor: &cursor})
		if _, _, err := c.answer(res, err, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if page.NextCursor == nil {
			return all, nil
		}
		cursor = *page.NextCursor
	}
}

func agentList() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{Use: "list", Short: "List agents (admin; keys are never shown again)", Args: cobra.NoArgs,
		Example: `  contextd agents list
  contextd agents list --json | jq -r '.data[] | select(.revoked_at == null) | .name'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			all, err := allAgents(cmd.Context(), c)
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), apiclient.AgentList{Data: all})
			}
			tw := table(cmd.OutOrStdout())
			fmt.Fprintln(tw, "ID\tNAME\tROLE\tPERMISSION\tPROJECTS\tMAX AUTHORITY\tREVOKED")
			for _, a := range all {
				revoked := "-"
				if a.RevokedAt != nil {
					revoked = a.RevokedAt.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Id, a.Name, a.Role, a.Permission, strings.Join(a.Projects, ","), a.MaxAuthority, revoked)
			}
			return tw.Flush()
		}}
	f.registerServer(cmd)
	f.registerJSON(cmd)
	return cmd
}

// agentID is the id of the agent an argument names: an id (agt_...), or
// the name of exactly one agent that is not revoked.
func agentID(ctx context.Context, c *client, arg string) (string, error) {
	if strings.HasPrefix(arg, "agt_") {
		return arg, nil
	}
	all, err := allAgents(ctx, c)
	if err != nil {
		return "", err
	}
	var ids []string
	for _, a := range all {
		if a.Name == arg && a.RevokedAt == nil {
			ids = append(ids, a.Id)
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("no agent named %q (contextd agents list shows them)", arg)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%d agents are named %q: give the id, one of %s", len(ids), arg, strings.Join(ids, ", "))
}

func printAgent(out io.Writer, a *apiclient.Agent) {
	state := ""
	if a.RevokedAt != nil {
		state = ", revoked " + a.RevokedAt.Format(time.RFC3339)
	}
	fmt.Fprintf(out, "agent %s (%s, role %s, %s on %s, authority up to %s%s)\n",
		a.Id, a.Name, a.Role, a.Permission, strings.Join(a.Projects, ","), a.MaxAuthority, state)
}

func agentRevoke() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{Use: "revoke ID|NAME", Short: "Revoke an agent's key (admin): refused at once, by every server within a second", Args: cobra.ExactArgs(1),
		Example: `  contextd agents revoke agt_01J...
  contextd agents revoke impl-1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			id, err := agentID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			var a apiclient.Agent
			res, err := c.Raw().RevokeAgent(cmd.Context(), id)
			raw, _, err := c.answer(res, err, &a)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) { printAgent(out, &a) })
		}}
	f.registerServer(cmd)
	f.registerJSON(cmd)
	return cmd
}

func agentUpdate() *cobra.Command {
	var f clientFlags
	var g agentGrant
	cmd := &cobra.Command{Use: "update ID|NAME", Short: "Change an agent's name, role, permission, projects or max authority (admin)", Args: cobra.ExactArgs(1),
		Long: `update changes the members given and leaves the others as they are. Every
server applies the change within a second; the global audit chain records
the agent as it now is. A revoked agent cannot change.`,
		Example: `  contextd agents update impl-1 --projects acme,globex
  contextd agents update agt_01J... --permission read-only --max-authority evidence`,
		RunE: func(cmd *cobra.Command, args []string) error {
			changed := cmd.Flags().Changed
			var body apiclient.AgentUpdate
			for _, m := range []struct {
				flag string
				v    *string
				to   **string
			}{{"name", &g.name, &body.Name}, {"role", &g.role, &body.Role}, {"permission", &g.permission, &body.Permission}} {
				if changed(m.flag) {
					*m.to = m.v
				}
			}
			if changed("projects") {
				p := g.projectList()
				if p == nil {
					p = []string{}
				}
				body.Projects = &p
			}
			if changed("max-authority") {
				m := apiclient.AgentUpdateMaxAuthority(g.maxAuthority)
				body.MaxAuthority = &m
			}
			if body == (apiclient.AgentUpdate{}) {
				return errors.New("nothing to change: give --name, --role, --permission, --projects or --max-authority")
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			id, err := agentID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			var a apiclient.Agent
			res, err := c.Raw().UpdateAgent(cmd.Context(), id, &apiclient.UpdateAgentParams{}, body)
			raw, _, err := c.answer(res, err, &a)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) { printAgent(out, &a) })
		}}
	f.registerServer(cmd)
	f.registerJSON(cmd)
	fl := cmd.Flags()
	fl.StringVar(&g.name, "name", "", "new name")
	fl.StringVar(&g.role, "role", "", "new role")
	fl.StringVar(&g.permission, "permission", "", "read-only, edit or admin")
	fl.StringVar(&g.projects, "projects", "", "comma-separated projects, or * (replaces the list)")
	fl.StringVar(&g.maxAuthority, "max-authority", "", "policy, instruction, evidence or hypothesis")
	return cmd
}
