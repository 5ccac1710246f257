package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// floor is the lower bound of one assembly on the bench's corpus: a raw pgx
// program doing only what an ideal assembly cannot avoid. For each layer
// (the project and _shared) it reads, by the always-on rank index, the
// narrow rows (key, version, stored block tokens) of the always-on items in
// rank order until their tokens fill the budget, reads the content of the
// ones that fit, reads 50 matches of the query through the full-text index
// (unranked), and then, in one transaction, stores one packet row with a
// rendered text as large as contextd's and one record per included item.
// Its SQL is its own, written against the schema (migrations/), not
// contextd's queries.
type floor struct {
	pool   *pgxpool.Pool
	budget int
}

func openFloor(ctx context.Context, dbURL string, conns, budget int) (*floor, error) {
	// The floor reads by index, by definition: with LIMIT 50 the planner
	// would rather scan items for the first full-text matches,
	// detoasting every search vector on the way, which no ideal assembly
	// would do.
	pool, err := openPool(ctx, dbURL, conns, map[string]string{"enable_seqscan": "off"})
	if err != nil {
		return nil, err
	}
	return &floor{pool: pool, budget: budget}, nil
}

func (f *floor) close() { f.pool.Close() }

// The always-on candidates of a layer in rank order, narrow rows only,
// 64 a page: items_always_rank_idx is exactly this order (its key column
// is COLLATE "C", byte order, as Go compares strings when the layers merge).
// The item row holds its current version's block tokens (00037), so the
// floor reads the item rows alone, as contextd's lanes do.
const (
	floorAlwaysCols = `SELECT i.key, i.current_version, i.block_tokens_o200k,
       i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time
FROM items i
WHERE i.project = $1 AND i.live AND i.trigger_kind = 'always'`
	floorAlwaysOrder = `
ORDER BY i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, i.key COLLATE "C"
LIMIT 64`
	floorAlwaysFirst = floorAlwaysCols + floorAlwaysOrder
	floorAlwaysNext  = floorAlwaysCols + `
  AND (i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, i.key COLLATE "C") > ($2, $3, $4, $5, $6)` + floorAlwaysOrder

	floorContent = `SELECT v.key, v.content
FROM unnest($2::text[], $3::integer[]) AS w(key, version)
JOIN item_versions v ON v.project = $1 AND v.key = w.key AND v.version = w.version`

	floorMatches = `SELECT key FROM items
WHERE project = $1 AND live AND search @@ websearch_to_tsquery('english', $2)
LIMIT 50`

	floorPacket = `INSERT INTO packets (project, id, created_at, created_by, target_role, request, format, tokenizer,
    rendered, rendered_sha256, token_budget, tokens_used, gaps, provenance_summary, snapshot)
VALUES ($1, $2, $3, 'agt_floor', $4, '{}', 'markdown', 'o200k_base',
    $5, $6, $7, $8, '[]', '{}', pg_current_snapshot()::text)`
)

var floorRecordCols = []string{"project", "packet_id", "ord", "subject_kind", "subject_project", "subject_key", "subject_version",
	"decision", "section", "position", "span_start", "span_end", "tokens", "rank", "rule", "layer", "created_at"}

// cand is one always-on candidate's narrow row.
type cand struct {
	layer   int // 0 the project, 1 _shared
	key     string
	version int32
	tokens  int32
	ra      int16
	rp      int64
	rc      int16
	rt      int64
}

func (a cand) compare(b cand) int {
	return cmp.Or(cmp.Compare(a.ra, b.ra), cmp.Compare(a.rp, b.rp), cmp.Compare(a.rc, b.rc), cmp.Compare(a.rt, b.rt),
		cmp.Compare(a.key, b.key), cmp.Compare(a.layer, b.layer))
}

// always reads a layer's candidates in rank order until their tokens reach
// the budget (or there are no more).
func (f *floor) always(ctx context.Context, project string, layer int) ([]cand, error) {
	var out []cand
	sum := 0
	for sum < f.budget {
		var rows pgx.Rows
		var err error
		if len(out) == 0 {
			rows, err = f.pool.Query(ctx, floorAlwaysFirst, project)
		} else {
			l := out[len(out)-1]
			rows, err = f.pool.Query(ctx, floorAlwaysNext, project, l.ra, l.rp, l.rc, l.rt, l.key)
		}
		if err != nil {
			return nil, err
		}
		n := 0
		for rows.Next() {
			c := cand{layer: layer}
			if err := rows.Scan(&c.key, &c.version, &c.tokens, &c.ra, &c.rp, &c.rc, &c.rt); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, c)
			sum += int(c.tokens)
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if n < 64 {
			break
		}
	}
	return out, nil
}

// contents reads the content of the given candidates of one layer.
func (f *floor) contents(ctx context.Context, project string, cs []cand, into map[string]string) error {
	if len(cs) == 0 {
		return nil
	}
	keys := make([]string, len(cs))
	versions := make([]int32, len(cs))
	for i, c := range cs {
		keys[i], versions[i] = c.key, c.version
	}
	rows, err := f.pool.Query(ctx, floorContent, project, keys, versions)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k, content string
		if err := rows.Scan(&k, &content); err != nil {
			return err
		}
		into[project+"\x00"+k] = content
	}
	return rows.Err()
}

// matches reads up to 50 full-text matches of any of the query's words.
func (f *floor) matches(ctx context.Context, project, query string) error {
	rows, err := f.pool.Query(ctx, floorMatches, project, strings.Join(strings.Fields(query), " or "))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
	}
	return rows.Err()
}

// assemble is one floor assembly in project for role.
func (f *floor) assemble(ctx context.Context, project, role, query string, renderedSize int) error {
	layers := []string{project, SharedProject}
	var all []cand
	for i, l := range layers {
		cs, err := f.always(ctx, l, i)
		if err != nil {
			return fmt.Errorf("floor: always-on of %s: %w", l, err)
		}
		all = append(all, cs...)
	}
	slices.SortFunc(all, cand.compare)
	used, n := 0, 0
	for n < len(all) && used+int(all[n].tokens) <= f.budget {
		used += int(all[n].tokens)
		n++
	}
	included := all[:n]
	content := map[string]string{}
	for i, l := range layers {
		var mine []cand
		for _, c := range included {
			if c.layer == i {
				mine = append(mine, c)
			}
		}
		if err := f.contents(ctx, l, mine, content); err != nil {
			return fmt.Errorf("floor: content of %s: %w", l, err)
		}
		if err := f.matches(ctx, l, query); err != nil {
			return fmt.Errorf("floor: matches in %s: %w", l, err)
		}
	}
	return f.store(ctx, project, role, layers, included, content, used, renderedSize)
}

// store renders the included items and writes the packet and its records
// in one transaction.
func (f *floor) store(ctx context.Context, project, role string, layers []string, included []cand, content map[string]string, used, size int) error {
	var b strings.Builder
	b.Grow(size + 4096)
	fmt.Fprintf(&b, "# Context Packet\nProject: %s | Role: %s\n\n## 5. Environment & Memory\n\n### Project Knowledge\n", project, role)
	spans := make([][2]int, len(included))
	for i, c := range included {
		start := b.Len()
		fmt.Fprintf(&b, "- %s: %s\n", c.key, strings.ReplaceAll(content[layers[c.layer]+"\x00"+c.key], "\n", "\n  "))
		spans[i] = [2]int{start, b.Len()}
	}
	rendered := fitSize(b.String(), size)
	sum := sha256.Sum256([]byte(rendered))
	now := time.Now().UTC()
	id := "ctxpkt_floor_" + randomID()
	rows := make([][]any, len(included))
	for i, c := range included {
		var start, end any
		if s, e := spans[i][0], min(spans[i][1], len(rendered)); s < e {
			start, end = int32(s), int32(e)
		}
		layer := "project"
		if c.layer == 1 {
			layer = "shared"
		}
		rows[i] = []any{project, id, int32(i), "item", layers[c.layer], c.key, c.version,
			"included", "Project Knowledge", int32(i), start, end, c.tokens, int32(i + 1), "always", layer, now}
	}
	err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, floorPacket, project, id, now, role, rendered, sum[:], int32(f.budget), int32(used)); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"packet_records"}, floorRecordCols, pgx.CopyFromRows(rows))
		return err
	})
	if err != nil {
		return fmt.Errorf("floor: store packet: %w", err)
	}
	return nil
}

// fitSize cuts s to size bytes, or repeats it up to size (repeating the
// real text keeps it as compressible as contextd's, unlike padding).
func fitSize(s string, size int) string {
	if size <= 0 || len(s) == 0 {
		return s
	}
	if len(s) >= size {
		return strings.ToValidUTF8(s[:size], "")
	}
	var b strings.Builder
	b.Grow(size)
	for b.Len() < size {
		b.WriteString(s[:min(len(s), size-b.Len())])
	}
	return strings.ToValidUTF8(b.String(), "")
}

func randomID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
