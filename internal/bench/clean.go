package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// CleanResult is what Clean removed from a server, and what it left.
type CleanResult struct {
	// Projects are the bench projects archived (DELETE: kept, hidden,
	// refusing writes; POST .../restore brings one back).
	Projects []string `json:"archived_projects"`
	// Agents are the names of the bench agents revoked.
	Agents []string `json:"revoked_agents"`
	// SharedItems are the keys of the bench items of _shared deleted.
	SharedItems []string `json:"deleted_shared_items"`
	// Kept are _shared items with a bench key whose content is not the
	// corpus's (someone changed or wrote it): left alone.
	Kept []string `json:"kept_shared_items"`
}

// maxSharedIndex bounds the _shared layer Clean regenerates to recognise
// bench items (a bench seeds 1,000 by default).
const maxSharedIndex = 100000

var (
	sharedKeyRE    = regexp.MustCompile(`^shared-(\d{6})$`)
	markerCorpusRE = regexp.MustCompile(`^contextd bench corpus v1 \((?:seeding|complete)\): seed=(\d+) items=\d+ shared=\d+ always=(\S+)$`)
)

// Clean removes through the API, as the admin of adminKey, what bench runs
// made on the servers at urls: it deletes the items bench wrote into
// _shared (a key of the corpus whose title and content are still the
// corpus's for a seed a bench project's marker names, or the default
// one), revokes the agents named bench-… whose scope is bench projects
// alone, and archives the bench projects (named bench-…, described
// "contextd bench …"), whose history stays. It touches nothing else, and
// running it again finds nothing to do.
func Clean(ctx context.Context, urls []string, adminKey string, progress io.Writer) (*CleanResult, error) {
	if progress == nil {
		progress = io.Discard
	}
	c := newClient(urls, 4)
	all, err := listAll[projectInfo](ctx, c, adminKey, "/v1/projects", "")
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	archived, err := listAll[projectInfo](ctx, c, adminKey, "/v1/projects", "archived=true")
	if err != nil {
		return nil, fmt.Errorf("list archived projects: %w", err)
	}
	benchProjects := map[string]bool{}
	seeds := []corpusSeed{{seed: Defaults().Seed, always: Defaults().Always}}
	var live []string
	for i, p := range append(all, archived...) {
		if !p.benchMade() {
			continue
		}
		benchProjects[p.Project] = true
		if i < len(all) {
			live = append(live, p.Project)
		}
		if s, ok := seedOf(p.Description); ok && !slices.Contains(seeds, s) {
			seeds = append(seeds, s)
		}
	}
	res := &CleanResult{Projects: []string{}, Agents: []string{}, SharedItems: []string{}, Kept: []string{}}
	if err := cleanShared(ctx, c, adminKey, seeds, res); err != nil {
		return res, err
	}
	if err := revokeBenchAgents(ctx, c, adminKey, benchProjects, res); err != nil {
		return res, err
	}
	for _, p := range live {
		err := c.call(ctx, http.MethodDelete, "/v1/projects/"+url.PathEscape(p), adminKey, nil, nil)
		var he *httpError
		if err != nil && !(errors.As(err, &he) && he.Status == http.StatusGone) { // archived meanwhile: done
			return res, fmt.Errorf("archive %s: %w", p, err)
		}
		res.Projects = append(res.Projects, p)
	}
	fmt.Fprintf(progress, "bench: --clean archived %d projects, revoked %d agents, deleted %d items of _shared\n",
		len(res.Projects), len(res.Agents), len(res.SharedItems))
	return res, nil
}

// corpusSeed is what generates a corpus's _shared layer: its seed and its
// fraction of always-on items (the layer's first n items do not depend on
// n).
type corpusSeed struct {
	seed   uint64
	always float64
}

func seedOf(marker string) (corpusSeed, bool) {
	m := markerCorpusRE.FindStringSubmatch(marker)
	if m == nil {
		return corpusSeed{}, false
	}
	seed, err1 := strconv.ParseUint(m[1], 10, 64)
	always, err2 := strconv.ParseFloat(m[2], 64)
	return corpusSeed{seed, always}, err1 == nil && err2 == nil
}

// sharedItem is an item of _shared as the list answers it.
type sharedItem struct {
	Key     string `json:"key"`
	Title   string `json:"title"`
	Content string `json:"content"`
}

// cleanShared deletes the items of _shared that a bench wrote and nobody
// changed since: a key of the corpus's form whose title and content are
// those the corpus of one of seeds gives that key.
func cleanShared(ctx context.Context, c *client, key string, seeds []corpusSeed, res *CleanResult) error {
	items, err := listAll[sharedItem](ctx, c, key, "/v1/projects/"+SharedProject+"/items", "")
	if err != nil {
		return fmt.Errorf("list _shared items: %w", err)
	}
	var cands []sharedItem
	n := 0
	for _, it := range items {
		if m := sharedKeyRE.FindStringSubmatch(it.Key); m != nil {
			if i, _ := strconv.Atoi(m[1]); i < maxSharedIndex {
				cands, n = append(cands, it), max(n, i+1)
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	layers := make([][]Item, len(seeds))
	for i, s := range seeds {
		layers[i] = NewCorpus(s.seed).Layer(SharedProject, n, s.always)
	}
	for _, it := range cands {
		i, _ := strconv.Atoi(sharedKeyRE.FindStringSubmatch(it.Key)[1])
		ours := false
		for _, l := range layers {
			ours = ours || l[i].Title == it.Title && l[i].Content == it.Content
		}
		if !ours {
			res.Kept = append(res.Kept, it.Key)
			continue
		}
		err := c.call(ctx, http.MethodDelete, "/v1/projects/"+SharedProject+"/items/"+it.Key, key, nil, nil)
		var he *httpError
		if err != nil && !(errors.As(err, &he) && he.Status == http.StatusNotFound) { // deleted meanwhile
			return fmt.Errorf("delete _shared item %s: %w", it.Key, err)
		}
		res.SharedItems = append(res.SharedItems, it.Key)
	}
	return nil
}

// benchAgent is an agent as the list answers it.
type benchAgent struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Projects  []string `json:"projects"`
	RevokedAt *string  `json:"revoked_at"`
}

// revokeBenchAgents revokes the live agents a bench made: named bench-…
// and scoped to bench projects alone.
func revokeBenchAgents(ctx context.Context, c *client, key string, benchProjects map[string]bool, res *CleanResult) error {
	agents, err := listAll[benchAgent](ctx, c, key, "/v1/agents", "")
	if err != nil {
		return fmt.Errorf("list agents: %w", err)
	}
	for _, a := range agents {
		if a.RevokedAt != nil || !strings.HasPrefix(a.Name, benchNamePrefix) || len(a.Projects) == 0 || !allBench(a.Projects, benchProjects) {
			continue
		}
		if err := c.call(ctx, http.MethodDelete, "/v1/agents/"+url.PathEscape(a.ID), key, nil, nil); err != nil {
			return fmt.Errorf("revoke agent %s (%s): %w", a.Name, a.ID, err)
		}
		res.Agents = append(res.Agents, a.Name)
	}
	return nil
}

func allBench(projects []string, bench map[string]bool) bool {
	for _, p := range projects {
		if !bench[p] {
			return false
		}
	}
	return true
}

// listAll reads every page of a list of the API (at most 1,000 a page).
func listAll[T any](ctx context.Context, c *client, key, path, query string) ([]T, error) {
	var out []T
	cursor := ""
	for {
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		full := path + "?" + q.Encode()
		if query != "" {
			full += "&" + query
		}
		var page struct {
			Data       []T     `json:"data"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := c.call(ctx, http.MethodGet, full, key, nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Data...)
		if page.NextCursor == nil {
			return out, nil
		}
		cursor = *page.NextCursor
	}
}
