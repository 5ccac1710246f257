package store_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

// The Citus section of docs/scale-out.md lists every table of the schema with where it
// goes on Citus. These tests hold that list to the schema a migrated
// database has, and the schema to the rules Citus imposes on it.

// citusListPath is the document that holds the list, relative to this
// package; citusListHeading is the heading of its section. Moving the list
// (to a page of its own, say) means changing these two.
const (
	citusListPath    = "../../docs/scale-out.md"
	citusListHeading = "## Beyond one PostgreSQL"
)

// gooseTable is goose's own bookkeeping, in schema public but not contextd's.
const gooseTable = "goose_db_version"

// citusExceptions are the schema objects (constraint or index names) that
// break a Citus rule on purpose, each with why; each must also be named in
// the Citus section of docs/scale-out.md. None does today. A violation of an object
// named here is not reported.
var citusExceptions = map[string]string{}

// placement is where one table goes: Dist is "reference", "local" or the
// distribution column; Coloc the table whose colocation group a
// distributed table joins (itself for its own group).
type placement struct{ Dist, Coloc string }

func (p placement) distributed() bool { return p.Dist != "reference" && p.Dist != "local" }

// citusList is the Citus section's table, by table name, and its SQL statements.
type citusList struct {
	Tables map[string]placement
	Calls  []citusCall
	Issues []string // the list's own faults: duplicate rows, bad groups
}

// citusCall is one create_reference_table or create_distributed_table
// statement of the section's SQL block; Dist is "reference" for the former.
type citusCall struct{ Table, Dist, Coloc string }

var (
	citusRefCall  = regexp.MustCompile(`create_reference_table\('(\w+)'\)`)
	citusDistCall = regexp.MustCompile(`create_distributed_table\('(\w+)',\s*'(\w+)'(?:,\s*colocate_with\s*=>\s*'(\w+)')?\)`)
)

// readCitusList parses the section's table (header: table | distribution |
// colocation | note) and the calls of its SQL block.
func readCitusList(t *testing.T, path string) citusList {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	section, ok := citusSection(string(src))
	require.True(t, ok, "%s has no section %q", path, citusListHeading)
	l := citusList{Tables: map[string]placement{}}
	inTable := false
	for line := range strings.SplitSeq(section, "\n") {
		cells := markdownCells(line)
		switch {
		case slices.Equal(cells, []string{"table", "distribution", "colocation", "note"}):
			inTable = true
		case !inTable || len(cells) == 0:
			inTable = false
		case strings.Trim(cells[0], "-") == "":
			// the header's separator row
		case len(cells) < 4:
			l.Issues = append(l.Issues, fmt.Sprintf("row %q has fewer than 4 cells", line))
		default:
			if _, dup := l.Tables[cells[0]]; dup {
				l.Issues = append(l.Issues, fmt.Sprintf("table %s is listed twice", cells[0]))
			}
			l.Tables[cells[0]] = placement{Dist: cells[1], Coloc: strings.Trim(cells[2], "—- ")}
		}
	}
	require.NotEmpty(t, l.Tables, "the %q section of %s has no table | distribution | colocation | note table", citusListHeading, path)
	type at struct {
		pos  int
		call citusCall
	}
	var calls []at
	for _, m := range citusRefCall.FindAllStringSubmatchIndex(section, -1) {
		calls = append(calls, at{m[0], citusCall{Table: section[m[2]:m[3]], Dist: "reference"}})
	}
	for _, m := range citusDistCall.FindAllStringSubmatchIndex(section, -1) {
		c := citusCall{Table: section[m[2]:m[3]], Dist: section[m[4]:m[5]]}
		if m[6] >= 0 {
			c.Coloc = section[m[6]:m[7]]
		}
		calls = append(calls, at{m[0], c})
	}
	// in the order of the block, which Citus needs too
	slices.SortFunc(calls, func(a, b at) int { return a.pos - b.pos })
	for _, c := range calls {
		l.Calls = append(l.Calls, c.call)
	}
	return l
}

// citusSection is the text of the section under citusListHeading, up to
// the next heading of its level.
func citusSection(doc string) (string, bool) {
	i := strings.Index(doc, "\n"+citusListHeading+"\n")
	if i < 0 {
		return "", false
	}
	rest := doc[i+len(citusListHeading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest, true
}

// markdownCells splits a markdown table row into its trimmed cells without
// backticks; nil for a line that is not a row.
func markdownCells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil
	}
	var cells []string
	for c := range strings.SplitSeq(line[1:len(line)-1], "|") {
		cells = append(cells, strings.Trim(strings.TrimSpace(c), "`"))
	}
	return cells
}

// citusSchema is what the rules need of a database's schema public.
type citusSchema struct {
	Columns map[string]map[string]column // table → column → column
	Unique  []uniqueIndex
	Foreign []foreignKey
}

type column struct {
	Type    string
	NotNull bool
}

// uniqueIndex is a unique index (a primary key's and a unique
// constraint's included) or an exclusion constraint's index; Keys are its
// key columns (not its INCLUDE columns), "" for an expression.
type uniqueIndex struct {
	Table, Name string
	Keys        []string
}

// foreignKey pairs From[i] of Table with To[i] of Ref.
type foreignKey struct {
	Name, Table, Ref string
	From, To         []string
	OnDelete         string // pg_constraint.confdeltype
	OnUpdate         string // pg_constraint.confupdtype
}

// readCitusSchema reads the tables of schema public (goose's aside) with
// their columns, unique indexes and foreign keys.
func readCitusSchema(t *testing.T, ctx context.Context, pool *pgxpool.Pool) citusSchema {
	t.Helper()
	s := citusSchema{Columns: map[string]map[string]column{}}
	rows, err := pool.Query(ctx, `
		SELECT c.relname, coalesce(a.attname, ''), coalesce(format_type(a.atttypid, a.atttypmod), ''), coalesce(a.attnotnull, false)
		FROM pg_class c
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND c.relname <> $1`, gooseTable)
	require.NoError(t, err)
	var table, name, typ string
	var notNull bool
	_, err = pgx.ForEachRow(rows, []any{&table, &name, &typ, &notNull}, func() error {
		if s.Columns[table] == nil {
			s.Columns[table] = map[string]column{}
		}
		if name != "" {
			s.Columns[table][name] = column{Type: typ, NotNull: notNull}
		}
		return nil
	})
	require.NoError(t, err)
	rows, err = pool.Query(ctx, `
		SELECT c.relname, ic.relname,
		       array(SELECT coalesce(a.attname, '') FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
		             LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		             WHERE k.n <= i.indnkeyatts ORDER BY k.n)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid
		WHERE c.relnamespace = 'public'::regnamespace AND (i.indisunique OR i.indisexclusion)`)
	require.NoError(t, err)
	s.Unique, err = pgx.CollectRows(rows, pgx.RowToStructByPos[uniqueIndex])
	require.NoError(t, err)
	rows, err = pool.Query(ctx, `
		SELECT k.conname, c.relname, r.relname,
		       array(SELECT a.attname FROM unnest(k.conkey) WITH ORDINALITY AS u(attnum, n)
		             JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.attnum ORDER BY u.n),
		       array(SELECT a.attname FROM unnest(k.confkey) WITH ORDINALITY AS u(attnum, n)
		             JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.attnum ORDER BY u.n),
		       k.confdeltype::text, k.confupdtype::text
		FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
		WHERE k.contype = 'f' AND (c.relnamespace = 'public'::regnamespace OR r.relnamespace = 'public'::regnamespace)`)
	require.NoError(t, err)
	s.Foreign, err = pgx.CollectRows(rows, pgx.RowToStructByPos[foreignKey])
	require.NoError(t, err)
	return s
}

// violation is one broken rule, by the object that breaks it.
type violation struct{ Object, Text string }

// citusViolations checks the list against the schema and the schema
// against Citus's rules, leaving out citusExceptions.
func citusViolations(s citusSchema, l citusList) []string {
	var vs []violation
	for _, issue := range l.Issues {
		vs = append(vs, violation{"list", issue})
	}
	vs = append(vs, tableViolations(s, l)...)
	vs = append(vs, callViolations(l)...)
	for _, u := range s.Unique {
		p, ok := l.Tables[u.Table]
		if ok && p.distributed() && !slices.Contains(u.Keys, p.Dist) {
			vs = append(vs, violation{u.Name, fmt.Sprintf("unique index %s of distributed table %s (%s) lacks its distribution column %s",
				u.Name, u.Table, strings.Join(u.Keys, ", "), p.Dist)})
		}
	}
	for _, fk := range s.Foreign {
		if text := foreignKeyViolation(fk, l); text != "" {
			vs = append(vs, violation{fk.Name, text})
		}
	}
	var out []string
	for _, v := range vs {
		if _, excepted := citusExceptions[v.Object]; !excepted {
			out = append(out, v.Text)
		}
	}
	slices.Sort(out)
	return out
}

// tableViolations: every table listed, every listed table there, each
// distribution column a NOT NULL column, each colocation group led by a
// distributed table of its own group, with one distribution column type.
func tableViolations(s citusSchema, l citusList) []violation {
	var vs []violation
	for table := range s.Columns {
		if _, ok := l.Tables[table]; !ok {
			vs = append(vs, violation{table, fmt.Sprintf("table %s is not in the list of %s", table, citusListPath)})
		}
	}
	for table, p := range l.Tables {
		cols, ok := s.Columns[table]
		switch {
		case !ok:
			vs = append(vs, violation{table, fmt.Sprintf("listed table %s does not exist", table)})
			continue
		case !p.distributed():
			if p.Coloc != "" {
				vs = append(vs, violation{table, fmt.Sprintf("%s table %s has a colocation (%s)", p.Dist, table, p.Coloc)})
			}
			continue
		}
		col, ok := cols[p.Dist]
		if !ok {
			vs = append(vs, violation{table, fmt.Sprintf("table %s has no distribution column %s", table, p.Dist)})
			continue
		}
		if !col.NotNull {
			vs = append(vs, violation{table, fmt.Sprintf("distribution column %s.%s may be NULL", table, p.Dist)})
		}
		lead, ok := l.Tables[p.Coloc]
		if !ok || !lead.distributed() || lead.Coloc != p.Coloc {
			vs = append(vs, violation{table, fmt.Sprintf("table %s's colocation %q is not a distributed table leading its own group", table, p.Coloc)})
			continue
		}
		if leadCol, ok := s.Columns[p.Coloc][lead.Dist]; ok && leadCol.Type != col.Type {
			vs = append(vs, violation{table, fmt.Sprintf("table %s's distribution column %s is %s, %s's %s is %s: not colocatable",
				table, p.Dist, col.Type, p.Coloc, lead.Dist, leadCol.Type)})
		}
	}
	return vs
}

// callViolations: the SQL block creates each reference and distributed
// table of the list once, as listed, reference tables first and a group's
// lead before the tables colocated with it.
func callViolations(l citusList) []violation {
	var vs []violation
	seen := map[string]bool{}
	sawDistributed := false
	for _, c := range l.Calls {
		p, ok := l.Tables[c.Table]
		want := c.Coloc
		if c.Coloc == "" || c.Coloc == "none" {
			want = c.Table
		}
		switch {
		case !ok:
			vs = append(vs, violation{c.Table, fmt.Sprintf("the SQL block creates %s, which is not listed", c.Table)})
		case seen[c.Table]:
			vs = append(vs, violation{c.Table, fmt.Sprintf("the SQL block creates %s twice", c.Table)})
		case c.Dist == "reference" && p.Dist != "reference", c.Dist != "reference" && c.Dist != p.Dist:
			vs = append(vs, violation{c.Table, fmt.Sprintf("the SQL block makes %s %s, the list %s", c.Table, c.Dist, p.Dist)})
		case c.Dist == "reference" && sawDistributed:
			vs = append(vs, violation{c.Table, fmt.Sprintf("the SQL block makes %s a reference table after a distributed one", c.Table)})
		case c.Dist != "reference" && want != p.Coloc:
			vs = append(vs, violation{c.Table, fmt.Sprintf("the SQL block colocates %s with %s, the list with %s", c.Table, want, p.Coloc)})
		case c.Dist != "reference" && want != c.Table && !seen[want]:
			vs = append(vs, violation{c.Table, fmt.Sprintf("the SQL block colocates %s with %s before creating %s", c.Table, want, want)})
		}
		seen[c.Table] = true
		sawDistributed = sawDistributed || c.Dist != "reference"
	}
	for table, p := range l.Tables {
		if p.Dist != "local" && !seen[table] {
			vs = append(vs, violation{table, fmt.Sprintf("the SQL block does not create %s", table)})
		}
	}
	return vs
}

// foreignKeyViolation is what is wrong with fk on Citus, or "". Allowed:
// between distributed tables of one colocation group, pairing their
// distribution columns; from a distributed or local table to a reference
// table; between reference tables; between local tables; from a reference
// table to a local one without cascading.
func foreignKeyViolation(fk foreignKey, l citusList) string {
	from, okFrom := l.Tables[fk.Table]
	to, okTo := l.Tables[fk.Ref]
	if !okFrom || !okTo {
		return "" // an unlisted table is reported as such
	}
	kind := func(p placement) string {
		if p.distributed() {
			return "distributed"
		}
		return p.Dist
	}
	name := fmt.Sprintf("foreign key %s from %s %s (%s) to %s %s (%s)", fk.Name, kind(from), fk.Table,
		strings.Join(fk.From, ", "), kind(to), fk.Ref, strings.Join(fk.To, ", "))
	switch fromKind, toKind := kind(from), kind(to); {
	case fromKind == "distributed" && toKind == "distributed":
		if from.Coloc != to.Coloc {
			return name + ": the tables are not colocated"
		}
		for i := range fk.From {
			if fk.From[i] == from.Dist && fk.To[i] == to.Dist {
				return ""
			}
		}
		return name + fmt.Sprintf(": does not pair distribution columns %s and %s", from.Dist, to.Dist)
	case toKind == "reference" || fromKind == toKind:
		return ""
	case fromKind == "reference" && toKind == "local":
		if fk.OnDelete == "c" || fk.OnUpdate == "c" {
			return name + ": a reference table's foreign key to a local table cannot cascade"
		}
		return ""
	default:
		return name + ": Citus allows no foreign key to a distributed table but from one colocated, and none from a distributed to a local table"
	}
}

// The Citus list of docs/scale-out.md is the schema's every table, and the schema keeps
// Citus's rules.
func TestCitusListCoversTheSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.New(t)
	list := readCitusList(t, citusListPath)
	schema := readCitusSchema(t, ctx, pool)
	require.Contains(t, schema.Columns, "items", "the schema read has the tables of a migrated database")
	require.NotContains(t, schema.Columns, gooseTable)
	require.Empty(t, citusViolations(schema, list))
}

// The checks catch each kind of drift: a table left out of the list, a
// listed table gone, a unique index or a foreign key that would not hold on
// Citus. Each case breaks a fresh migrated database or the parsed list.
func TestCitusChecksCatchDrift(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		sql   string
		list  func(l citusList)
		wants []string
	}{
		{name: "table left out of the list", list: func(l citusList) { delete(l.Tables, "ui_sessions") },
			wants: []string{"table ui_sessions is not in the list", "the SQL block creates ui_sessions, which is not listed"}},
		{name: "listed table that does not exist", list: func(l citusList) { l.Tables["ghosts"] = placement{"project", "items"} },
			wants: []string{"listed table ghosts does not exist", "the SQL block does not create ghosts"}},
		{name: "new table", sql: `CREATE TABLE notes (project text NOT NULL, id text NOT NULL, PRIMARY KEY (project, id))`,
			wants: []string{"table notes is not in the list"}},
		{name: "unique index without the distribution column", sql: `CREATE UNIQUE INDEX items_key_only ON items (key)`,
			wants: []string{"unique index items_key_only of distributed table items (key) lacks its distribution column project"}},
		{name: "unique constraint with the column only in INCLUDE",
			sql:   `ALTER TABLE packets ADD CONSTRAINT packets_id_key UNIQUE (id) INCLUDE (project)`,
			wants: []string{"unique index packets_id_key of distributed table packets (id) lacks its distribution column project"}},
		{name: "foreign key pairing the distribution column with another column", sql: `
			CREATE UNIQUE INDEX items_key_project ON items (key, project);
			ALTER TABLE item_terms ADD CONSTRAINT item_terms_crossed_fkey FOREIGN KEY (project, key) REFERENCES items (key, project)`,
			wants: []string{"foreign key item_terms_crossed_fkey from distributed item_terms (project, key) to distributed items (key, project): does not pair distribution columns project and project"}},
		{name: "foreign key between groups", sql: `
			ALTER TABLE ui_sessions ADD COLUMN project text;
			ALTER TABLE ui_sessions ADD CONSTRAINT ui_sessions_project_fkey FOREIGN KEY (project) REFERENCES project_counters (project)`,
			wants: []string{"foreign key ui_sessions_project_fkey from distributed ui_sessions (project) to distributed project_counters (project): the tables are not colocated"}},
		{name: "foreign key from a reference table to a distributed one", sql: `
			ALTER TABLE projects ADD COLUMN counted text;
			ALTER TABLE projects ADD CONSTRAINT projects_counted_fkey FOREIGN KEY (counted) REFERENCES project_counters (project)`,
			wants: []string{"foreign key projects_counted_fkey from reference projects (counted) to distributed project_counters (project): Citus allows no foreign key"}},
		{name: "nullable distribution column", sql: `ALTER TABLE audit_heads DROP CONSTRAINT audit_heads_pkey, ALTER COLUMN chain DROP NOT NULL`,
			wants: []string{"distribution column audit_heads.chain may be NULL"}},
		{name: "SQL block disagrees", list: func(l citusList) {
			i := slices.IndexFunc(l.Calls, func(c citusCall) bool { return c.Table == "ui_sessions" })
			l.Calls[i].Dist = "agent_id"
		},
			wants: []string{"the SQL block makes ui_sessions agent_id, the list token_sha256"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.New(t)
			if tc.sql != "" {
				_, err := pool.Exec(t.Context(), tc.sql)
				require.NoError(t, err)
			}
			list := readCitusList(t, citusListPath)
			if tc.list != nil {
				tc.list(list)
			}
			got := citusViolations(readCitusSchema(t, t.Context(), pool), list)
			require.Len(t, got, len(tc.wants), "violations: %q", got)
			for _, want := range tc.wants {
				require.True(t, slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, want) }),
					"no violation %q among %q", want, got)
			}
		})
	}
}
