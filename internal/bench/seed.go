package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// BatchSize is the number of items per batch request: 1,000 items of at
// most ~2.3 KB of JSON each stay well under the server's default 8 MiB
// body limit (a batch may hold 10,000).
const BatchSize = 1000

// ProjectName is the name of bench project i.
func ProjectName(i int) string { return fmt.Sprintf("bench-%d", i) }

// marker is the description a bench project gets once its corpus (and the
// _shared layer) is completely written; --reuse looks for it. While seeding
// the description says so, with the same counts, so an interrupted seed is
// never reused but its size is still known.
func (cfg *Config) marker(done bool) string {
	state := "seeding"
	if done {
		state = "complete"
	}
	return fmt.Sprintf("contextd bench corpus v1 (%s): seed=%d items=%d shared=%d always=%g",
		state, cfg.Seed, cfg.Items, cfg.Shared, cfg.Always)
}

var (
	markerItemsRE  = regexp.MustCompile(`^contextd bench corpus v1 .* items=(\d+)`)
	markerSharedRE = regexp.MustCompile(`^contextd bench corpus v1 .* shared=(\d+)`)
)

// layers are the corpus's layers: the bench projects, then _shared.
type layer struct {
	project string
	items   []Item
}

// existingMarkers returns the descriptions of the projects that exist.
func (r *runner) existingMarkers(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	cursor := ""
	for {
		var page struct {
			Data []struct {
				Project     string `json:"project"`
				Description string `json:"description"`
			} `json:"data"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := r.c.call(ctx, http.MethodGet, "/v1/projects?limit=1000&cursor="+url.QueryEscape(cursor), r.cfg.AdminKey, nil, &page); err != nil {
			return nil, err
		}
		for _, p := range page.Data {
			out[p.Project] = p.Description
		}
		if page.NextCursor == nil {
			return out, nil
		}
		cursor = *page.NextCursor
	}
}

// seed writes the corpus through the batch endpoint, unless --reuse finds
// it complete already. Keys a previous, larger corpus left beyond the
// asked counts are tombstoned, so the live corpus is exactly the asked one.
func (r *runner) seed(ctx context.Context) error {
	if err := r.claim(ctx, r.projects...); err != nil {
		return err
	}
	markers, err := r.existingMarkers(ctx)
	if err != nil {
		return fmt.Errorf("list projects: %w", err)
	}
	want := r.cfg.marker(true)
	if r.cfg.Reuse {
		reusable := true
		for _, l := range r.layers[:r.cfg.Projects] {
			reusable = reusable && markers[l.project] == want
		}
		if reusable {
			reusable, err = r.lastKeysLive(ctx)
			if err != nil {
				return err
			}
		}
		if reusable {
			r.logf("reusing the corpus of %s (%s)", strings.Join(r.projects, ", "), want)
			return nil
		}
		r.logf("no complete corpus with these parameters to reuse; seeding")
	}
	prevItems, prevShared := 0, 0
	for _, l := range r.layers[:r.cfg.Projects] {
		prevItems = max(prevItems, markerCount(markerItemsRE, markers[l.project]))
	}
	for _, d := range markers {
		prevShared = max(prevShared, markerCount(markerSharedRE, d))
	}
	if !r.cfg.Dedicated {
		prevShared = 0 // _shared is not the bench's to tidy on a server of others (Clean removes what it wrote)
	}
	for _, p := range r.projects {
		if err := r.c.call(ctx, http.MethodPut, "/v1/projects/"+p, r.cfg.AdminKey, map[string]string{"description": r.cfg.marker(false)}, nil); err != nil {
			return fmt.Errorf("create project %s: %w", p, err)
		}
	}
	if err := r.writeLayers(ctx); err != nil {
		return err
	}
	if err := r.tombstoneSurplus(ctx, prevItems, prevShared); err != nil {
		return err
	}
	for _, p := range r.projects {
		if err := r.c.call(ctx, http.MethodPut, "/v1/projects/"+p, r.cfg.AdminKey, map[string]string{"description": want}, nil); err != nil {
			return fmt.Errorf("mark project %s: %w", p, err)
		}
	}
	return nil
}

// lastKeysLive reports whether the last item of every layer is live (the
// marker says the corpus was complete; this checks nobody removed it since).
func (r *runner) lastKeysLive(ctx context.Context) (bool, error) {
	for _, l := range r.layers {
		if len(l.items) == 0 {
			continue
		}
		path := "/v1/projects/" + url.PathEscape(l.project) + "/items/" + l.items[len(l.items)-1].Key
		err := r.c.call(ctx, http.MethodGet, path, r.cfg.AdminKey, nil, nil)
		var he *httpError
		if errors.As(err, &he) && he.Status == http.StatusNotFound {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

func markerCount(re *regexp.Regexp, desc string) int {
	m := re.FindStringSubmatch(desc)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// writeLayers writes every layer in batches of BatchSize, the layers in
// parallel (writers of one project queue on its head row anyway), with a
// progress bar on stderr.
func (r *runner) writeLayers(ctx context.Context) error {
	total := 0
	for _, l := range r.layers {
		total += len(l.items)
	}
	var done atomic.Int64
	bar := newBar(r.cfg.Progress, "seeding", total)
	g, gctx := newGroup(ctx)
	for _, l := range r.layers {
		g.Go(func() error {
			for start := 0; start < len(l.items); start += BatchSize {
				batch := l.items[start:min(start+BatchSize, len(l.items))]
				body := map[string]any{"items": batch}
				if err := r.c.call(gctx, http.MethodPost, "/v1/projects/"+url.PathEscape(l.project)+"/items", r.cfg.AdminKey, body, nil); err != nil {
					return fmt.Errorf("seed %s: %w", l.project, err)
				}
				bar.set(int(done.Add(int64(len(batch)))))
			}
			return nil
		})
	}
	err := g.Wait()
	bar.finish()
	return err
}

// tombstoneSurplus deletes the keys [n, prev) of each layer.
func (r *runner) tombstoneSurplus(ctx context.Context, prevItems, prevShared int) error {
	type del struct{ project, key string }
	var dels []del
	for _, l := range r.layers {
		prev := prevItems
		if l.project == SharedProject {
			prev = prevShared
		}
		for i := len(l.items); i < prev; i++ {
			dels = append(dels, del{l.project, Key(l.project, i)})
		}
	}
	if len(dels) == 0 {
		return nil
	}
	bar := newBar(r.cfg.Progress, "removing a previous corpus's surplus items", len(dels))
	var next, done atomic.Int64
	g, gctx := newGroup(ctx)
	for range 8 {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(dels) {
					return nil
				}
				d := dels[i]
				err := r.c.call(gctx, http.MethodDelete, "/v1/projects/"+url.PathEscape(d.project)+"/items/"+d.key, r.cfg.AdminKey, nil, nil)
				var he *httpError
				if err != nil && !(errors.As(err, &he) && he.Status == http.StatusNotFound) {
					return fmt.Errorf("tombstone %s/%s: %w", d.project, d.key, err)
				}
				bar.set(int(done.Add(1)))
			}
		})
	}
	err := g.Wait()
	bar.finish()
	return err
}

// bar is a progress bar on one line of w.
type bar struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	unit  string
	total int
	start time.Time
	last  time.Time
	n     int
}

func newBar(w io.Writer, label string, total int) *bar { return newBarOf(w, label, "items", total) }

// newBarOf is a bar counting unit ("items", "records").
func newBarOf(w io.Writer, label, unit string, total int) *bar {
	b := &bar{w: w, label: label, unit: unit, total: total, start: time.Now()}
	b.draw()
	return b
}

func (b *bar) set(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n = n
	if time.Since(b.last) >= 200*time.Millisecond || n == b.total {
		b.draw()
	}
}

func (b *bar) draw() {
	const width = 30
	filled := 0
	if b.total > 0 {
		filled = width * b.n / b.total
	}
	rate := 0.0
	if el := time.Since(b.start).Seconds(); el > 0 {
		rate = float64(b.n) / el
	}
	fmt.Fprintf(b.w, "\r%s [%s%s] %d/%d %s  %.0f/s ", b.label, strings.Repeat("=", filled), strings.Repeat(" ", width-filled), b.n, b.total, b.unit, rate)
	b.last = time.Now()
}

func (b *bar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.draw()
	fmt.Fprintln(b.w)
}

// group runs goroutines and keeps the first error, cancelling the others'
// context (errgroup without the dependency).
type group struct {
	wg     sync.WaitGroup
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func newGroup(ctx context.Context) (*group, context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	return &group{cancel: cancel}, ctx
}

func (g *group) Go(fn func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := fn(); err != nil {
			g.once.Do(func() { g.err = err; g.cancel() })
		}
	}()
}

func (g *group) Wait() error {
	g.wg.Wait()
	g.cancel()
	return g.err
}
