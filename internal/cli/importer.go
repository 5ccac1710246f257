package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	apiclient "github.com/contextd/contextd/api/client"
)

// Batches go to the server at most this large: well inside the import
// endpoint's body limit, and small enough that a refused batch is cheap
// to split.
const (
	importBatchItems = 1000
	importBatchBytes = 4 << 20
)

// entry is one item of the input and where it was: a line of JSON Lines,
// or an element of a JSON array.
type entry struct {
	where string // "line 17" or "item 17"
	n     int    // the line or item number
	raw   json.RawMessage
}

// refusal is a refused item's line of output, held until its batch is
// settled so the lines come out in the file's order.
type refusal struct {
	n    int
	text string
}

// importer streams a file of items to POST .../items:import in batches.
// A refused batch is split to find its bad items, and the good ones are
// written; what was refused is reported with its line and reason. Running
// it again on the same file changes nothing (the server answers the items
// it already holds as unchanged).
type importer struct {
	c        *client
	project  string
	format   string
	out, log io.Writer
	tty      bool
	total    int // items expected, 0 when unknown (standard input)
	seen     int
	lastTick time.Time
	pending  []refusal
	next     string // the first line (or item) not yet written

	created, updated, unchanged, refused int
}

var itemPointer = regexp.MustCompile(`^/items/(\d+)(/.*)?$`)

// run reads r to its end, sending full batches as it goes.
func (im *importer) run(ctx context.Context, r io.Reader) error {
	var batch []entry
	size := 0
	err := readEntries(r, func(e entry, bad error) error {
		if bad != nil {
			im.refuse(e, bad.Error())
			return nil
		}
		if len(batch) == importBatchItems || (size+len(e.raw) > importBatchBytes && len(batch) > 0) {
			if err := im.settle(ctx, batch); err != nil {
				return err
			}
			batch, size = nil, 0
		}
		batch, size = append(batch, e), size+len(e.raw)
		return nil
	})
	if err == nil {
		err = im.settle(ctx, batch)
	} else if len(batch) > 0 {
		im.next = batch[0].where
	}
	im.printRefusals()
	im.tick(true)
	if err != nil {
		// Stopped: say where, so a re-run (which changes nothing it already
		// wrote) is known to be needed.
		fmt.Fprintf(im.out, "stopped at %s: it and what follows were not written (run the import again: what is written stays unchanged): %v\n", im.next, err)
	}
	fmt.Fprintf(im.out, "created %d, updated %d, unchanged %d, refused %d\n", im.created, im.updated, im.unchanged, im.refused)
	if err != nil {
		return err
	}
	if im.refused > 0 {
		return fmt.Errorf("%d of %d items refused", im.refused, im.seen)
	}
	return nil
}

// settle writes a batch and prints its refusals in the file's order.
func (im *importer) settle(ctx context.Context, batch []entry) error {
	if len(batch) > 0 {
		im.next = batch[0].where
	}
	err := im.flush(ctx, batch)
	im.printRefusals()
	return err
}

func (im *importer) printRefusals() {
	slices.SortStableFunc(im.pending, func(a, b refusal) int { return a.n - b.n })
	for _, r := range im.pending {
		fmt.Fprintln(im.out, r.text)
	}
	im.pending = im.pending[:0]
}

// flush writes a batch. Refused, it drops the items the problem names and
// writes the rest; a problem that names none is narrowed by halves, down
// to the one item it is about.
func (im *importer) flush(ctx context.Context, batch []entry) error {
	if len(batch) == 0 {
		return nil
	}
	res, err := im.send(ctx, batch)
	if err == nil {
		im.created, im.updated, im.unchanged = im.created+res.Created, im.updated+res.Updated, im.unchanged+res.Unchanged
		im.seen += len(batch)
		im.tick(false)
		return nil
	}
	var ae *apiclient.Problem
	if !errors.As(err, &ae) || fatal(ae) {
		return err
	}
	named := map[int][]string{}
	for _, f := range ae.Errors {
		if m := itemPointer.FindStringSubmatch(f.Pointer); m != nil {
			i, _ := strconv.Atoi(m[1])
			if i < len(batch) {
				named[i] = append(named[i], strings.TrimSpace(ae.Code+": "+m[2]+" "+f.Detail))
			}
		}
	}
	if len(named) > 0 {
		var rest []entry
		for i, e := range batch {
			if reasons, ok := named[i]; ok {
				im.refuse(e, strings.Join(reasons, "; "))
				continue
			}
			rest = append(rest, e)
		}
		return im.flush(ctx, rest)
	}
	if len(batch) == 1 {
		im.refuse(batch[0], ae.Code+": "+ae.Detail)
		return nil
	}
	half := len(batch) / 2
	if err := im.flush(ctx, batch[:half]); err != nil {
		return err
	}
	return im.flush(ctx, batch[half:])
}

// fatal reports a refusal about the request as a whole (the key, the
// project, the server), which no item of it can be blamed for.
func fatal(e *apiclient.Problem) bool {
	switch {
	case e.Status == http.StatusUnauthorized, e.Status == http.StatusNotFound, e.Status == http.StatusTooManyRequests, e.Status >= 500:
		return true
	case e.Status == http.StatusForbidden:
		return e.Code != "authority_exceeds_grant"
	}
	return false
}

// send posts one batch; a busy or briefly unavailable server (429, 503),
// or an answer that did not come (a timeout, a dropped connection), is
// tried again, a few times, with a growing pause: an import is idempotent,
// so a batch written once and sent again is unchanged.
func (im *importer) send(ctx context.Context, batch []entry) (*apiclient.BatchResult, error) {
	items := make([]json.RawMessage, len(batch))
	for i, e := range batch {
		items[i] = e.raw
	}
	for attempt, pause := 0, 200*time.Millisecond; ; attempt, pause = attempt+1, pause*2 {
		res, err := im.c.ImportItems(ctx, im.project, apiclient.ImportRequestFormat(im.format), items)
		var p *apiclient.Problem
		transient := err != nil && !errors.As(err, &p) && ctx.Err() == nil
		if attempt == 5 || (!transient && !isStatus(err, http.StatusTooManyRequests) && !isStatus(err, http.StatusServiceUnavailable)) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}

func (im *importer) refuse(e entry, reason string) {
	im.refused++
	im.seen++
	im.pending = append(im.pending, refusal{n: e.n, text: fmt.Sprintf("%s: refused: %s", e.where, reason)})
}

// tick shows progress on standard error: a line that redraws itself on a
// terminal, otherwise a line at most every second, and one at the end.
func (im *importer) tick(final bool) {
	if !final && time.Since(im.lastTick) < time.Second && !im.tty {
		return
	}
	im.lastTick = time.Now()
	msg := fmt.Sprintf("importing: %d items", im.seen)
	if im.total > 0 {
		pct := 100 * im.seen / max(im.total, 1)
		bar := strings.Repeat("#", pct/5) + strings.Repeat(".", 20-pct/5)
		msg = fmt.Sprintf("importing: [%s] %d/%d items (%d%%)", bar, im.seen, im.total, pct)
	}
	if im.tty {
		fmt.Fprint(im.log, "\r"+msg)
		if final {
			fmt.Fprintln(im.log)
		}
		return
	}
	fmt.Fprintln(im.log, msg)
}

// readEntries calls yield with every item of r: the elements of a JSON
// array, the lines of JSON Lines (blank lines skipped), or the items of
// one {"items": [...]} document (what export wrote before JSON Lines). A
// line that is not JSON is yielded with its error and the rest goes on.
func readEntries(r io.Reader, yield func(entry, error) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	first, err := firstByte(br)
	if err != nil {
		return err
	}
	if first == '[' {
		return readArray(br, yield)
	}
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return err
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			var v json.RawMessage
			if jerr := json.Unmarshal(t, &v); jerr != nil {
				if n == 1 {
					// Not one value per line: one pretty-printed document.
					rest, rerr := io.ReadAll(br)
					if rerr != nil {
						return rerr
					}
					return readDocument(append(line, rest...), yield)
				}
				if yerr := yield(entry{where: fmt.Sprintf("line %d", n), n: n}, fmt.Errorf("not JSON: %v", jerr)); yerr != nil {
					return yerr
				}
			} else if items, ok := wrapped(t); ok && n == 1 {
				return yieldAll(items, "item", yield)
			} else if yerr := yield(entry{where: fmt.Sprintf("line %d", n), n: n, raw: append(json.RawMessage(nil), t...)}, nil); yerr != nil {
				return yerr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

func firstByte(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.Peek(1)
		if err == io.EOF {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if !strings.ContainsRune(" \t\r\n", rune(b[0])) {
			return b[0], nil
		}
		_, _ = br.ReadByte()
	}
}

// readArray streams a JSON array's elements, without holding the array.
func readArray(r io.Reader, yield func(entry, error) error) error {
	dec := json.NewDecoder(r)
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("not a JSON array: %w", err)
	}
	for n := 1; dec.More(); n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("item %d: not JSON: %w", n, err)
		}
		if err := yield(entry{where: fmt.Sprintf("item %d", n), n: n, raw: raw}, nil); err != nil {
			return err
		}
	}
	return nil
}

func readDocument(doc []byte, yield func(entry, error) error) error {
	if items, ok := wrapped(doc); ok {
		return yieldAll(items, "item", yield)
	}
	var one json.RawMessage
	if err := json.Unmarshal(doc, &one); err != nil {
		return fmt.Errorf("the file is neither JSON Lines, a JSON array nor one JSON document: %w", err)
	}
	return yield(entry{where: "item 1", n: 1, raw: one}, nil)
}

// wrapped reports whether doc is {"items": [...]}, and its items.
func wrapped(doc []byte) ([]json.RawMessage, bool) {
	var w map[string]json.RawMessage
	if json.Unmarshal(doc, &w) != nil || len(w) != 1 || w["items"] == nil {
		return nil, false
	}
	var items []json.RawMessage
	if json.Unmarshal(w["items"], &items) != nil {
		return nil, false
	}
	return items, true
}

func yieldAll(items []json.RawMessage, what string, yield func(entry, error) error) error {
	for i, raw := range items {
		if err := yield(entry{where: fmt.Sprintf("%s %d", what, i+1), n: i + 1, raw: raw}, nil); err != nil {
			return err
		}
	}
	return nil
}

// countItems counts the items of a JSON Lines file for the progress bar:
// its lines that are not blank. It is 0, unknown, for standard input, a
// JSON array or one JSON document.
func countItems(path string) int {
	if path == "-" {
		return 0
	}
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	n := 0
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) { // a line longer than the buffer
			if first {
				return 0
			}
			_, err = br.ReadSlice('\n')
		}
		t := bytes.TrimSpace(line)
		if first {
			if _, ok := wrapped(t); ok || !json.Valid(t) {
				return 0
			}
		}
		if len(t) > 0 {
			n++
		}
		if err != nil {
			return n
		}
	}
}
