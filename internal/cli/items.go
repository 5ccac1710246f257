package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

// newItems is `contextd items`: the item endpoints of a running server.
func newItems() *cobra.Command {
	cmd := &cobra.Command{Use: "items", Short: "Write and read items of a running server"}
	var f clientFlags
	imp, exp := transferCommands(&f)
	for _, sc := range []*cobra.Command{imp, exp} {
		f.registerWith(sc, projectRequired)
	}
	cmd.AddCommand(itemPut(), itemGet(), itemList(), itemVersions(), itemDelete(), itemInjections(), imp, exp)
	return cmd
}

// itemFlags are the everyday members of an item write; --file gives the
// whole item, and the flags given set their members on top.
type itemFlags struct {
	file, kind, authority, confidence, source, title, stateKey string
	priority                                                   int32
	always, relevance, pinnedOnly, template, stem, propose     bool
	keywords, visibleTo, hiddenFrom                            []string
}

func itemPut() *cobra.Command {
	var f clientFlags
	var it itemFlags
	cmd := &cobra.Command{
		Use:   "put KEY [CONTENT]",
		Short: "Write an item: its content as an argument and its members as flags, or the whole item as JSON from --file",
		Long: `put writes an item (a full replacement: members not given take their
defaults); a new version only when something changed. The item is built
from the flags, on top of --file's JSON (the API's ItemWrite, - for standard
input) when it is given. One trigger: --always, --keywords, --relevance or
--pinned-only (the default: always).`,
		Example: `  contextd items put refund.rules "Refunds over 500 EUR need a manager's approval." --project acme --kind instruction --keywords refund,refunds
  contextd items put tone "Answer in plain words." --project acme --always --hidden-from critic
  contextd items put greeting "Hello {{customer}}." --project acme --template --always
  contextd items put refund.rules --project acme --file item.json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			body, err := it.item(cmd, args)
			if err != nil {
				return err
			}
			rd, err := jsonBody(body)
			if err != nil {
				return err
			}
			var item apiclient.Item
			res, err := c.Raw().PutItemWithBody(cmd.Context(), f.project, args[0], &apiclient.PutItemParams{}, contentJSON, rd)
			raw, status, err := c.answer(res, err, &item)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) {
				if status == http.StatusAccepted {
					printProposed(out, raw)
					return
				}
				if status == http.StatusOK {
					fmt.Fprintf(out, "item %s/%s v%d unchanged\n", item.Project, item.Key, item.Version)
					return
				}
				fmt.Fprintf(out, "item %s/%s v%d written: %s, authority %s, %s, %d tokens\n",
					item.Project, item.Key, item.Version, item.Kind, item.Authority, describeTrigger(item.Trigger), item.Tokens)
			})
		},
	}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	fl := cmd.Flags()
	fl.StringVar(&it.file, "file", "", "the item as JSON (the API's ItemWrite), - for standard input; the flags given set their members on top")
	fl.StringVar(&it.kind, "kind", "", "knowledge (default), state, episode, skill, decision, instruction, evidence or tool")
	fl.StringVar(&it.authority, "authority", "", "policy, instruction, evidence or hypothesis (default: the server's, from the kind, the source and your grant)")
	fl.StringVar(&it.confidence, "confidence", "", "verified, probable (default) or uncertain")
	fl.StringVar(&it.source, "source", "", "where it comes from: human, project (default), ... or other:TAG")
	fl.StringVar(&it.title, "title", "", "a title")
	fl.StringVar(&it.stateKey, "state-key", "", "items of one state key contradict each other: the newest wins")
	fl.Int32Var(&it.priority, "priority", 0, "priority (higher ranks first)")
	fl.BoolVar(&it.always, "always", false, "trigger: in every packet (the default when no trigger is given)")
	fl.StringSliceVar(&it.keywords, "keywords", nil, "trigger: when the conversation has one of these words (comma-separated)")
	fl.BoolVar(&it.stem, "stem", false, "with --keywords: match the words' English stems (chargeback matches chargebacks)")
	fl.BoolVar(&it.relevance, "relevance", false, "trigger: ranked against the request's query")
	fl.BoolVar(&it.pinnedOnly, "pinned-only", false, "trigger: only when a request pins its key")
	fl.BoolVar(&it.template, "template", false, "the content is a template ({{name}} from the request's variables)")
	fl.StringSliceVar(&it.visibleTo, "visible-to", nil, "only these roles see it (comma-separated)")
	fl.StringSliceVar(&it.hiddenFrom, "hidden-from", nil, "these roles never see it (comma-separated)")
	fl.BoolVar(&it.propose, "propose", false, "store it as a proposal that another principal promotes (contextd proposals)")
	return cmd
}

// item is the item to write: --file's members, then the content argument
// and the flags given.
func (it *itemFlags) item(cmd *cobra.Command, args []string) (map[string]any, error) {
	m := map[string]any{}
	if it.file != "" {
		raw, err := readInput(cmd, it.file)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("--file: not JSON: %w", err)
		}
		if len(args) == 2 {
			return nil, errors.New("give the content or --file, not both")
		}
	}
	if len(args) == 2 {
		m["content"] = args[1]
	}
	if _, ok := m["content"]; !ok {
		return nil, errors.New("give the content, or the item as JSON with --file")
	}
	changed := cmd.Flags().Changed
	for name, v := range map[string]string{"kind": it.kind, "authority": it.authority, "confidence": it.confidence,
		"source": it.source, "title": it.title, "state_key": it.stateKey} {
		if v != "" {
			m[name] = v
		}
	}
	if changed("priority") {
		m["priority"] = it.priority
	}
	if changed("template") {
		m["template"] = it.template
	}
	if it.propose {
		m["proposal"] = true
	}
	trigger := map[string]any{}
	switch {
	case it.always:
		trigger["always"] = true
	case len(it.keywords) > 0:
		trigger["keywords"] = it.keywords
		if it.stem {
			trigger["match"] = "stem"
		}
	case it.relevance:
		trigger["relevance"] = true
	case it.pinnedOnly:
		trigger["pinned_only"] = true
	}
	if n := btoi(it.always) + btoi(len(it.keywords) > 0) + btoi(it.relevance) + btoi(it.pinnedOnly); n > 1 {
		return nil, errors.New("one trigger: --always, --keywords, --relevance or --pinned-only")
	}
	if len(trigger) > 0 {
		m["trigger"] = trigger
	}
	if len(it.visibleTo) > 0 || len(it.hiddenFrom) > 0 {
		roles, _ := m["roles"].(map[string]any)
		if roles == nil {
			roles = map[string]any{}
		}
		if len(it.visibleTo) > 0 {
			roles["visible_to"] = it.visibleTo
		}
		if len(it.hiddenFrom) > 0 {
			roles["hidden_from"] = it.hiddenFrom
		}
		m["roles"] = roles
	}
	return m, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func itemGet() *cobra.Command {
	var f clientFlags
	var asOf string
	cmd := &cobra.Command{Use: "get KEY", Short: "Print an item's current version (or the one current at --as-of)", Args: cobra.ExactArgs(1),
		Example: `  contextd items get refund.rules --project acme
  contextd items get refund.rules --project acme --as-of 2026-12-01T09:00:00Z --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			q := &apiclient.GetItemParams{}
			if asOf != "" {
				q.AsOf = &asOf
			}
			var it apiclient.Item
			res, err := c.Raw().GetItem(cmd.Context(), f.project, args[0], q)
			raw, _, err := c.answer(res, err, &it)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) { printItem(out, &it) })
		}}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	cmd.Flags().StringVar(&asOf, "as-of", "", "RFC 3339 time: the version that was current then")
	return cmd
}

func printItem(out io.Writer, it *apiclient.Item) {
	state := ""
	if it.Deleted {
		state = " (deleted)"
	}
	fmt.Fprintf(out, "item       %s/%s v%d%s\n", it.Project, it.Key, it.Version, state)
	fmt.Fprintf(out, "kind       %s, authority %s, confidence %s, source %s\n", it.Kind, it.Authority, it.Confidence, it.Source)
	fmt.Fprintf(out, "trigger    %s\n", describeTrigger(it.Trigger))
	if r := describeRoles(it.Roles); r != "" {
		fmt.Fprintf(out, "roles      %s\n", r)
	}
	for _, kv := range [][2]string{{"title", it.Title}, {"summary", it.Summary}, {"state key", it.StateKey}} {
		if kv[1] != "" {
			fmt.Fprintf(out, "%-10s %s\n", kv[0], kv[1])
		}
	}
	extra := ""
	if it.Template {
		extra = ", a template"
	}
	if it.Priority != 0 {
		extra += fmt.Sprintf(", priority %d", it.Priority)
	}
	fmt.Fprintf(out, "written    %s by %s, %d tokens%s\n", it.CreatedAt.Format(time.RFC3339), it.CreatedBy, it.Tokens, extra)
	if p := it.PromotedFrom; p != nil {
		fmt.Fprintf(out, "promoted   from proposal #%d by %s\n", p.Proposal, p.ProposedBy)
	}
	if n := it.PendingProposals; n != nil && *n > 0 {
		fmt.Fprintf(out, "proposals  %d pending (contextd proposals list --item %s)\n", *n, it.Key)
	}
	if !it.Deleted {
		fmt.Fprintln(out, "----")
		fmt.Fprint(out, it.Content)
		if !strings.HasSuffix(it.Content, "\n") {
			fmt.Fprintln(out)
		}
	}
}

// describeTrigger says when an item comes into a packet.
func describeTrigger(t apiclient.Trigger) string {
	switch {
	case t.Always != nil && *t.Always:
		return "always"
	case t.Keywords != nil:
		s := "keywords " + strings.Join(*t.Keywords, ", ")
		if t.Match != nil && *t.Match == "stem" {
			s += " (stems)"
		}
		return s
	case t.Tool != nil:
		return "tool " + *t.Tool
	case t.PinnedOnly != nil && *t.PinnedOnly:
		return "pinned only"
	case t.Relevance != nil && *t.Relevance:
		return "relevance"
	}
	return "-"
}

func describeRoles(r apiclient.Roles) string {
	var parts []string
	if r.VisibleTo != nil && len(*r.VisibleTo) > 0 {
		parts = append(parts, "visible to "+strings.Join(*r.VisibleTo, ", "))
	}
	if r.HiddenFrom != nil && len(*r.HiddenFrom) > 0 {
		parts = append(parts, "hidden from "+strings.Join(*r.HiddenFrom, ", "))
	}
	return strings.Join(parts, "; ")
}

func itemList() *cobra.Command {
	var f clientFlags
	var query, kind, cursor string
	var limit int
	cmd := &cobra.Command{Use: "list", Short: "List the project's items, a page at a time (--query for full-text search)", Args: cobra.NoArgs,
		Example: `  contextd items list --project acme
  contextd items list --project acme --query "refund manager" --kind instruction
  contextd items list --project acme --limit 1000 --json | jq -r '.data[].key'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			q := &apiclient.ListItemsParams{}
			for p, v := range map[**string]string{&q.Q: query, &q.Kind: kind, &q.Cursor: cursor} {
				if v != "" {
					*p = &v
				}
			}
			if limit > 0 {
				l := apiclient.Limit(limit)
				q.Limit = &l
			}
			var page apiclient.ItemList
			res, err := c.Raw().ListItems(cmd.Context(), f.project, q)
			raw, _, err := c.answer(res, err, &page)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) {
				tw := table(out)
				fmt.Fprintln(tw, "KEY\tV\tKIND\tAUTHORITY\tTRIGGER\tTOKENS\tTITLE OR CONTENT")
				for _, it := range page.Data {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\n", it.Key, it.Version, it.Kind, it.Authority,
						firstLine(describeTrigger(it.Trigger), 30), it.Tokens, firstLine(first(it.Title, it.Content), 60))
				}
				tw.Flush()
				if page.NextCursor != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "more: add --cursor %s\n", *page.NextCursor)
				}
			})
		}}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	cmd.Flags().StringVar(&query, "query", "", "full-text query (websearch syntax)")
	cmd.Flags().StringVar(&kind, "kind", "", "only items of this kind")
	cmd.Flags().IntVar(&limit, "limit", 0, "page size, 1 to 1000 (default 100)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "the page after the one that said more")
	return cmd
}

func itemVersions() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{Use: "versions KEY", Short: "Print an item's versions, oldest first", Args: cobra.ExactArgs(1),
		Example: `  contextd items versions refund.rules --project acme`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			var page apiclient.ItemList
			res, err := c.Raw().ListItemVersions(cmd.Context(), f.project, args[0], &apiclient.ListItemVersionsParams{})
			raw, _, err := c.answer(res, err, &page)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) {
				tw := table(out)
				fmt.Fprintln(tw, "V\tWRITTEN\tBY\tKIND\tAUTHORITY\tCONTENT")
				for _, it := range page.Data {
					content := firstLine(it.Content, 60)
					if it.Deleted {
						content = "(deleted)"
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", it.Version, it.CreatedAt.Format(time.RFC3339), it.CreatedBy, it.Kind, it.Authority, content)
				}
				tw.Flush()
			})
		}}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	return cmd
}

func itemDelete() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{Use: "delete KEY", Short: "Tombstone an item (a new version; its history stays)", Args: cobra.ExactArgs(1),
		Example: `  contextd items delete refund.rules --project acme`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			var it apiclient.Item
			res, err := c.Raw().DeleteItem(cmd.Context(), f.project, args[0], &apiclient.DeleteItemParams{})
			raw, _, err := c.answer(res, err, &it)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) {
				fmt.Fprintf(out, "item %s/%s deleted: tombstone v%d (its versions stay: contextd items versions %s --project %s)\n",
					it.Project, it.Key, it.Version, it.Key, it.Project)
			})
		}}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	return cmd
}

// itemInjections is `items injections`, and newInjections the same at the
// top level, where people look for "where did this fact go".
func itemInjections() *cobra.Command {
	cmd := newInjections()
	cmd.Example = `  contextd items injections refund.rules --project acme`
	return cmd
}

func newInjections() *cobra.Command {
	var f clientFlags
	var project string
	cmd := &cobra.Command{Use: "injections KEY", Short: "Print the packets that included an item, newest first (--for-project for a _shared item)", Args: cobra.ExactArgs(1),
		Example: `  contextd injections refund.rules --project acme
  contextd injections tone --project _shared --for-project acme`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			q := &apiclient.ListItemInjectionsParams{}
			if project != "" {
				q.Project = &project
			}
			var page apiclient.InjectionList
			res, err := c.Raw().ListItemInjections(cmd.Context(), f.project, args[0], q)
			raw, _, err := c.answer(res, err, &page)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) {
				tw := table(out)
				fmt.Fprintln(tw, "PACKET\tCREATED\tROLE\tAGENT\tV\tSECTION\tRULE")
				for _, in := range page.Data {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", in.PacketId, in.CreatedAt.Format(time.RFC3339), in.TargetRole, in.Agent, in.Version, in.Section, in.Rule)
				}
				tw.Flush()
				if len(page.Data) == 0 {
					fmt.Fprintf(out, "no packet of %s included it\n", page.Project)
				}
			})
		}}
	f.registerWith(cmd, "project of the item (env CONTEXTD_PROJECT, client config's project), required")
	f.registerJSON(cmd)
	cmd.Flags().StringVar(&project, "for-project", "", "for a _shared item: the project whose packets to list")
	return cmd
}
