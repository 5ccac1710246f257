package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
	"github.com/contextd/contextd/internal/navi"
)

// transferCommands are `items import` and `items export`.
func transferCommands(f *clientFlags) (imp, exp *cobra.Command) {
	var importFile, importFormat string
	imp = &cobra.Command{Use: "import FILE", Short: "Write items from a file of any size (JSON Lines or a JSON array; - for standard input) in batches, reporting each refused line",
		Example: `  contextd items import items.jsonl --project acme
  contextd items export --project acme | contextd items import - --project acme-copy
  contextd items import packets.jsonl --format navi --project acme`,
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
		Example: `  contextd items export --project acme > acme.jsonl
  contextd items export --project acme --format kxm`,
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
