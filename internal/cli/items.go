package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
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
	base := func() (string, error) {
		if f.project == "" {
			return "", errors.New("--project is required (or set CONTEXTD_PROJECT)")
		}
		return "/v1/projects/" + url.PathEscape(f.project) + "/items", nil
	}
	call := func(cmd *cobra.Command, method, path string, body any) error {
		c, err := f.client()
		if err != nil {
			return err
		}
		var out any
		if err := c.do(cmd.Context(), method, path, body, &out); err != nil {
			return err
		}
		return printJSON(cmd.OutOrStdout(), out)
	}
	var file string
	put := &cobra.Command{
		Use:   "put KEY [CONTENT]",
		Short: "Write an item: its content as an argument, or the whole item as JSON from --file (- for standard input)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := base()
			if err != nil {
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
			return call(cmd, http.MethodPut, b+"/"+url.PathEscape(args[0]), body)
		},
	}
	put.Flags().StringVar(&file, "file", "", "the item as JSON (the API's ItemWrite), - for standard input")
	oneKey := func(use, short, method, suffix string) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
			b, err := base()
			if err != nil {
				return err
			}
			return call(cmd, method, b+"/"+url.PathEscape(args[0])+suffix, nil)
		}}
	}
	list := &cobra.Command{Use: "list", Short: "List the project's items (--query for full-text search)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := base()
			if err != nil {
				return err
			}
			q := url.Values{}
			if v, _ := cmd.Flags().GetString("query"); v != "" {
				q.Set("q", v)
			}
			return call(cmd, http.MethodGet, b+"?"+q.Encode(), nil)
		}}
	list.Flags().String("query", "", "full-text query")
	imp, exp := transferCommands(&f, base, call)
	subs := []*cobra.Command{put, list, imp, exp,
		oneKey("get KEY", "Print an item's current version", http.MethodGet, ""),
		oneKey("versions KEY", "Print an item's versions, oldest first", http.MethodGet, "/versions"),
		oneKey("delete KEY", "Tombstone an item (a new version; its history stays)", http.MethodDelete, ""),
		oneKey("injections KEY", "Print the packets that included an item, newest first", http.MethodGet, "/injections"),
	}
	for _, sc := range subs {
		f.registerWith(sc, "project (env CONTEXTD_PROJECT), required")
		cmd.AddCommand(sc)
	}
	return cmd
}

// transferCommands are `items import` and `items export`.
func transferCommands(f *clientFlags, base func() (string, error), call func(*cobra.Command, string, string, any) error) (imp, exp *cobra.Command) {
	var importFile string
	imp = &cobra.Command{Use: "import", Short: "Write many items in one transaction, all or nothing (--file: {\"items\": [...]} or [...], - for standard input)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := base()
			if err != nil {
				return err
			}
			if importFile == "" {
				return errors.New("--file is required")
			}
			raw, err := readInput(cmd, importFile)
			if err != nil {
				return err
			}
			var body any
			if err := json.Unmarshal(raw, &body); err != nil {
				return fmt.Errorf("--file: not JSON: %w", err)
			}
			if list, ok := body.([]any); ok {
				body = map[string]any{"items": list}
			}
			return call(cmd, http.MethodPost, b, body)
		}}
	imp.Flags().StringVar(&importFile, "file", "", "the items as JSON, - for standard input")
	exp = &cobra.Command{Use: "export", Short: "Print every live item as {\"items\": [...]} that import takes back", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := base()
			if err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			items, err := exportItems(cmd, c, b)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), map[string]any{"items": items})
		}}
	return imp, exp
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
			var out any
			if err := c.do(cmd.Context(), http.MethodGet, "/v1/agents?limit=1000", nil, &out); err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), out)
		}}
	revoke := &cobra.Command{Use: "revoke ID", Short: "Revoke an agent's key (admin)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var out any
			if err := c.do(cmd.Context(), http.MethodDelete, "/v1/agents/"+url.PathEscape(args[0]), nil, &out); err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), out)
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

// exportItems reads every page of the project's items.
func exportItems(cmd *cobra.Command, c *client, base string) ([]map[string]any, error) {
	out := []map[string]any{}
	for cursor := ""; ; {
		var page struct {
			Data       []map[string]any `json:"data"`
			NextCursor string           `json:"next_cursor"`
		}
		if err := c.get(cmd.Context(), base+"?limit=1000&cursor="+url.QueryEscape(cursor), &page); err != nil {
			return nil, err
		}
		for _, it := range page.Data {
			w := map[string]any{}
			for _, k := range writable {
				if v, ok := it[k]; ok && v != nil {
					w[k] = v
				}
			}
			out = append(out, w)
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}
