package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

// client talks to a running contextd: the Go client (api/client), with
// the key it was given.
type client struct {
	*apiclient.Client
	key string
}

// answer reads the answer of a Raw call: its JSON as sent (what --json
// prints) and, when out is not nil, decoded into out.
func (c *client) answer(res *http.Response, err error, out any) (json.RawMessage, int, error) {
	status := 0
	if res != nil {
		status = res.StatusCode
	}
	var raw json.RawMessage
	if err := c.ReadAnswer(res, err, &raw); err != nil {
		return nil, status, err
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, status, fmt.Errorf("contextd at %s: the answer is not the JSON expected: %w", c.BaseURL(), err)
		}
	}
	return raw, status, nil
}

// show prints an answer: its JSON with --json, else what text writes.
func (f *clientFlags) show(cmd *cobra.Command, raw json.RawMessage, text func(out io.Writer)) error {
	if f.json {
		return printRaw(cmd.OutOrStdout(), raw)
	}
	text(cmd.OutOrStdout())
	return nil
}

// printJSON writes a value as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printRaw writes an answer's JSON indented, its members in the order the
// server sent them.
func printRaw(w io.Writer, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// table writes aligned columns; the caller flushes it.
func table(out io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
}

// jsonBody is v as a request body, nil for no body.
func jsonBody(v any) (io.Reader, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

const contentJSON = "application/json"

// isStatus reports whether err is a problem answer of that status.
func isStatus(err error, status int) bool {
	var p *apiclient.Problem
	return errors.As(err, &p) && p.Status == status
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func deref32(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// firstLine is the first line of a text, cut to n runes.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// printErrorHelp prints, after a failed command's error, what the answer
// says in detail (its field errors, its request id) and what to try when
// the server could not be reached or refused the key.
func printErrorHelp(w io.Writer, err error) {
	var p *apiclient.Problem
	if errors.As(err, &p) {
		for _, f := range p.Errors {
			where := f.Pointer
			if f.Parameter != "" {
				where = "parameter " + f.Parameter
			}
			fmt.Fprintf(w, "  %s: %s: %s\n", where, f.Code, f.Detail)
		}
		switch {
		case p.Status == http.StatusUnauthorized:
			fmt.Fprintln(w, "  the server does not know this key: check --key, CONTEXTD_KEY or the client config")
		case p.Status >= 500 && p.RequestID != "":
			fmt.Fprintf(w, "  request id %s (the server's log has it)\n", p.RequestID)
		}
		return
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		fmt.Fprintln(w, "  no server answers there: start one (make run, or contextd serve), or name yours with --url or CONTEXTD_URL")
	}
}
