package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
	"github.com/contextd/contextd/internal/navi"
)

// printJSON writes an answer as indented JSON: the command line's output is
// the API's, for people and scripts alike.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newItems is `contextd items`: the item endpoints of a running server.
func newItems() *cobra.Command {
	cmd := &cobra.Command{Use: "items", Short: "Write and read items of a running server"}
	var f clientFlags
	// call sends one request of the project's and prints the answer.
	call := func(cmd *cobra.Command, send func(ctx context.Context, raw *apiclient.Raw, project string) (*http.Response, error)) error {
		if err := f.needProject(); err != nil {
			return err
		}
		c, err := f.client()
		if err != nil {
			return err
		}
		return c.call(cmd, func(ctx context.Context, raw *apiclient.Raw) (*http.Response, error) {
			return send(ctx, raw, f.project)
		})
	}
	var file string
	put := &cobra.Command{
		Use:   "put KEY [CONTENT]",
		Short: "Write an item: its content as an argument, or the whole item as JSON from --file (- for standard input)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.needProject(); err != nil {
				return err
			}
			var body any
			switch {
			case file != "" && len(args) == 2:
				return errors.New("give the content or --file, not both")
			case file != "":
				raw, err := readInput(cmd, file)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(raw, &body); err != nil {
					return fmt.Errorf("--file: not JSON: %w", err)
				}
			case len(args) == 2:
				body = map[string]any{"content": args[1]}
			default:
				return errors.New("give the content, or the item as JSON with --file")
			}
			rd, err := jsonBody(body)
			if err != nil {
				return err
			}
			return call(cmd, func(ctx context.Context, raw *apiclient.Raw, project string) (*http.Response, error) {
				return raw.PutItemWithBody(ctx, project, args[0], &apiclient.PutItemParams{}, contentJSON, rd)
			})
		},
	}
	put.Flags().StringVar(&file, "file", "", "the item as JSON (the API's ItemWrite), - for standard input")
	oneKey := func(use, short string, send func(ctx context.Context, raw *apiclient.Raw, project, key string) (*http.Response, error)) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd, func(ctx context.Context, raw *apiclient.Raw, project string) (*http.Response, error) {
				return send(ctx, raw, project, args[0])
			})
		}}
	}
	list := &cobra.Command{Use: "list", Short: "List the project's items (--query for full-text search)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := &apiclient.ListItemsParams{}
			if v, _ := cmd.Flags().GetString("query"); v != "" {
				q.Q = &v
			}
			return call(cmd, func(ctx context.Context, raw *apiclient.Raw, project string) (*http.Response, error) {
				return raw.ListItems(ctx, project, q)
			})
		}}
	list.Flags().String("query", "", "full-text query")
	imp, exp := transferCommands(&f)
	subs := []*cobra.Command{put, list, imp, exp,
		oneKey("get KEY", "Print an item's current version", func(ctx context.Context, raw *apiclient.Raw, project, key string) (*http.Response, error) {
			return raw.GetItem(ctx, project, key, &apiclient.GetItemParams{})
		}),
		oneKey("versions KEY", "Print an item's versions, oldest first", func(ctx context.Context, raw *apiclient.Raw, project, key string) (*http.Response, error) {
			return raw.ListItemVersions(ctx, project, key, &apiclient.ListItemVersionsParams{})
		}),
		oneKey("delete KEY", "Tombstone an item (a new version; its history stays)", func(ctx context.Context, raw *apiclient.Raw, project, key string) (*http.Response, error) {
			return raw.DeleteItem(ctx, project, key, &apiclient.DeleteItemParams{})
		}),
		oneKey("injections KEY", "Print the packets that included an item, newest first", func(ctx context.Context, raw *apiclient.Raw, project, key string) (*http.Response, error) {
			return raw.ListItemInjections(ctx, project, key, &apiclient.ListItemInjectionsParams{})
		}),
	}
	for _, sc := range subs {
		f.registerWith(sc, "project (env CONTEXTD_PROJECT), required")
		cmd.AddCommand(sc)
	}
	return cmd
}

// needProject is the error of a command that needs --project without it.
func (f *clientFlags) needProject() error {
	if f.project == "" {
		return errors.New("--project is required (or set CONTEXTD_PROJECT)")
	}
	return nil
}

// transferCommands are `items import` and `items export`.
func transferCommands(f *clientFlags) (imp, exp *cobra.Command) {
	var importFile, importFormat string
	imp = &cobra.Command{Use: "import FILE", Short: "Write items from a file of any size (JSON Lines or a JSON array; - for standard input) in batches, reporting each refused line",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.needProject(); err != nil {
				return err
			}
			if len(args) == 1 {
				importFile = args[0]
			}
			if importFile == "" {
				return errors.New("give the file to import (- for standard input)")
			}
			f.timeout = 10 * time.Minute // a batch of 1,000 items on a busy server
			c, err := f.client()
			if err != nil {
				return err
			}
			var r io.Reader = cmd.InOrStdin()
			if importFile != "-" {
				file, err := os.Open(importFile)
				if err != nil {
					return err
				}
				defer file.Close()
				r = file
			}
			im := &importer{c: c, project: f.project, format: importFormat, out: cmd.OutOrStdout(), log: cmd.ErrOrStderr(),
				tty: isTerminal(cmd.ErrOrStderr()), total: countItems(importFile)}
			return im.run(cmd.Context(), r)
		}}
	imp.Flags().StringVar(&importFile, "file", "", "the file (instead of the argument)")
	imp.Flags().StringVar(&importFormat, "format", "contextd", "the items' format: contextd, kxm or navi")
	var exportFormat string
	exp = &cobra.Command{Use: "export", Short: "Print every live item as JSON Lines, in a format import takes back", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.needProject(); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			return exportItems(cmd, c, f.project, exportFormat)
		}}
	exp.Flags().StringVar(&exportFormat, "format", "contextd", "contextd, kxm or navi")
	return imp, exp
}

// newInjections is `contextd injections KEY`: the packets that included
// an item, newest first (the same as `items injections`, at the top level
// where people look for "where did this fact go").
func newInjections() *cobra.Command {
	var f clientFlags
	var project string
	cmd := &cobra.Command{Use: "injections KEY", Short: "Print the packets that included an item, newest first (--for-project for a _shared item)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.needProject(); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			q := &apiclient.ListItemInjectionsParams{}
			if project != "" {
				q.Project = &project
			}
			return c.call(cmd, func(ctx context.Context, raw *apiclient.Raw) (*http.Response, error) {
				return raw.ListItemInjections(ctx, f.project, args[0], q)
			})
		}}
	f.registerWith(cmd, "project of the item (env CONTEXTD_PROJECT), required")
	cmd.Flags().StringVar(&project, "for-project", "", "for a _shared item: the project whose packets to list")
	return cmd
}

// isTerminal reports whether w is a terminal (where a progress bar may
// redraw itself).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func readInput(cmd *cobra.Command, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	return os.ReadFile(path)
}

// agentsRemote are `agents list` and `agents revoke`, against a running
// server (an admin key).
func agentsRemote() []*cobra.Command {
	var f clientFlags
	list := &cobra.Command{Use: "list", Short: "List agents (admin; keys are never shown again)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			limit := apiclient.Limit(1000)
			return c.call(cmd, func(ctx context.Context, raw *apiclient.Raw) (*http.Response, error) {
				return raw.ListAgents(ctx, &apiclient.ListAgentsParams{Limit: &limit})
			})
		}}
	revoke := &cobra.Command{Use: "revoke ID", Short: "Revoke an agent's key (admin)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return c.call(cmd, func(ctx context.Context, raw *apiclient.Raw) (*http.Response, error) {
				return raw.RevokeAgent(ctx, args[0])
			})
		}}
	for _, sc := range []*cobra.Command{list, revoke} {
		f.registerServer(sc)
	}
	return []*cobra.Command{list, revoke}
}

// newVersion is `contextd version`: the module version and the commit it
// was built from, as the Go toolchain recorded them.
func newVersion() *cobra.Command {
	return &cobra.Command{Use: "version", Short: "Print contextd's version", Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
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

// writable are the members of an item that a write takes (ItemWrite, with
// the key): an export holds these only, so that importing it changes
// nothing.
var writable = []string{"key", "kind", "source", "title", "summary", "content", "priority", "authority", "confidence",
	"state_key", "valid_from", "valid_until", "slot", "trigger", "roles", "template", "metadata", "provenance"}

// naviPacket is an item of the list as navi's ContextPacket (navi.FromItem:
// an item imported from navi comes back as it was sent).
func naviPacket(it map[string]any) navi.Packet {
	str := func(k string) string { s, _ := it[k].(string); return s }
	prio, _ := it["priority"].(float64)
	meta, _ := json.Marshal(it["metadata"])
	return navi.FromItem(str("key"), str("source"), str("title"), str("content"), int(prio), meta)
}

// exportItems writes every live item of the project, one JSON object a
// line: in contextd's format the members a write takes (so importing the
// export changes nothing), in kxm's the item as GET ?format=kxm gives it,
// in navi's a ContextPacket.
func exportItems(cmd *cobra.Command, c *client, project, format string) error {
	if format != "contextd" && format != "kxm" && format != "navi" {
		return fmt.Errorf("--format must be contextd, kxm or navi, not %q", format)
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetEscapeHTML(false)
	ctx, limit, kxm := cmd.Context(), apiclient.Limit(1000), apiclient.GetItemParamsFormatKxm
	for cursor := ""; ; {
		var page struct {
			Data       []map[string]any `json:"data"`
			NextCursor string           `json:"next_cursor"`
		}
		res, err := c.Raw().ListItems(ctx, project, &apiclient.ListItemsParams{Limit: &limit, Cursor: &cursor})
		if err := c.ReadAnswer(res, err, &page); err != nil {
			return err
		}
		for _, it := range page.Data {
			w := map[string]any{}
			if format == "navi" {
				if err := enc.Encode(naviPacket(it)); err != nil {
					return err
				}
				continue
			}
			if format == "kxm" {
				key, _ := it["key"].(string)
				res, err := c.Raw().GetItem(ctx, project, key, &apiclient.GetItemParams{Format: &kxm})
				if err := c.ReadAnswer(res, err, &w); err != nil {
					return err
				}
			} else {
				for _, k := range writable {
					if v, ok := it[k]; ok && v != nil {
						w[k] = v
					}
				}
			}
			if err := enc.Encode(w); err != nil {
				return err
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		cursor = page.NextCursor
	}
}
