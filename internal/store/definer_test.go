package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/ident"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// The SECURITY DEFINER functions run as their owner for the server's login
// (migration 00025). These tests attack them as that login, with the one
// tool a member of contextd_app has for it: objects of its own temporary
// schema, which PostgreSQL searches first for relations and types unless a
// function's search_path names pg_temp.

// pinnedPath is the search_path every definer function, and every trigger
// function a definer function's statements can fire, pins.
const pinnedPath = "search_path=pg_catalog, public, pg_temp"

// definerFixture is what one attack redacts: in its own project, version 1
// of item "secret" (and not item "decoy"), and the packet that included
// both.
type definerFixture struct {
	Project, Redaction, Packet, Secret, Decoy string
}

// definerCalls are the SECURITY DEFINER functions of the schema, by
// regprocedure, each called with valid arguments on a fixture. A definer
// function that is not here fails TestDefinerFunctionsCannotBeHijacked:
// add its call here and what it must do to checkDefinerWork.
var definerCalls = map[string]func(f definerFixture) (string, []any){
	"contextd_redact_version(text,text)": func(f definerFixture) (string, []any) {
		return "SELECT contextd_redact_version($1, $2)", []any{f.Project, f.Redaction}
	},
	"contextd_redact_packet(text,text,text,text)": func(f definerFixture) (string, []any) {
		return "SELECT contextd_redact_packet($1, $2, $1, $3)", []any{f.Project, f.Packet, f.Redaction}
	},
	// A trigger function (00038), called as the login may: by making the
	// decoy a keyword item through the item row's columns it may write.
	"contextd_item_keyword_terms()": func(f definerFixture) (string, []any) {
		return `UPDATE public.items SET trigger_kind = 'keywords', trigger_keywords = '{Hunter}',
			trigger_terms = ARRAY[project || pg_catalog.chr(31) || 'hunter'] WHERE project = $1 AND key = 'decoy'`, []any{f.Project}
	},
	// Another (00039), likewise: by making the decoy a restricted tool
	// item (after the call above: the definer calls run in name order).
	"contextd_item_restricted()": func(f definerFixture) (string, []any) {
		return `UPDATE public.items SET trigger_tool = 'hunter_tool', open = false WHERE project = $1 AND key = 'decoy'`, []any{f.Project}
	},
}

// shadowModes are the ways an attack shadows the names a definer function
// could reach: temporary views and temporary tables (with a trigger, and
// for redactions a row naming the decoy) of every name, domains of every
// name (types), and pg_temp functions of every function name. One
// connection each: a temporary view and a table cannot share a name.
var shadowModes = []string{"views", "tables", "types", "functions"}

// TestDefinerFunctionsCannotBeHijacked: as a login that is a member of
// contextd_app only, for every SECURITY DEFINER function and every way of
// shadowing what it names, the shadow's code never runs and the function
// redacts the real rows. The definer functions, and the trigger functions
// their statements fire, pin search_path with pg_temp last, and the login
// may create nothing in schema public or in the database.
func TestDefinerFunctionsCannotBeHijacked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewURL(t)
	owner := ownerPool(t, url)
	login, appURL := definerLogin(t, ctx, owner, url)

	requireDefinersCovered(t, ctx, owner)
	requirePinned(t, ctx, owner)
	requireNoCreate(t, ctx, owner, login)

	fx := definerFixtures(t, ctx, owner, shadowModes)
	names := shadowNames(t, ctx, owner, login)
	t.Logf("shadowing %d names: %d relations, %d function names (the definer functions call %s), %d types",
		len(names.all), len(names.relations), len(names.functions), strings.Join(names.defined, ", "), len(names.types))
	for _, mode := range shadowModes {
		t.Run(mode, func(t *testing.T) {
			ran, errs := attackDefiners(t, ctx, appURL, mode, names, fx[mode])
			for _, fn := range slices.Sorted(maps.Keys(errs)) {
				require.NoError(t, errs[fn], "%s with %s shadowed", fn, mode)
			}
			require.Empty(t, ran, "code of the login's temporary schema ran inside a definer function")
			checkDefinerWork(t, ctx, owner, fx[mode])
		})
	}
}

// TestDefinerHardeningDownAndUp: 00025 revokes CREATE from PUBLIC on a
// database made by an older PostgreSQL; its Down restores the definitions
// before it exactly, and those can be hijacked in every way but pg_temp
// functions (which shows the attacks of
// TestDefinerFunctionsCannotBeHijacked reach an unpinned definer function);
// and it applies again after its Down.
func TestDefinerHardeningDownAndUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Empty(t)
	owner := ownerPool(t, url)
	// A database made by PostgreSQL 14 or older lets PUBLIC create in
	// schema public; here PUBLIC may make schemas too.
	_, err := owner.Exec(ctx, "GRANT CREATE ON SCHEMA public TO PUBLIC")
	require.NoError(t, err)
	_, err = owner.Exec(ctx, `DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO PUBLIC', current_database()); END $$`)
	require.NoError(t, err)

	require.NoError(t, store.MigrateUpToForTest(ctx, url, 24))
	before := functionDefs(t, ctx, owner)
	require.NoError(t, store.MigrateUp(ctx, url))
	after := functionDefs(t, ctx, owner)
	require.NotEqual(t, before, after)
	login, appURL := definerLogin(t, ctx, owner, url)
	requireNoCreate(t, ctx, owner, login)
	requirePinned(t, ctx, owner)

	fx := definerFixtures(t, ctx, owner, shadowModes)
	require.NoError(t, store.MigrateDownToForTest(ctx, url, 24))
	require.Equal(t, before, functionDefs(t, ctx, owner), "00025's Down restores every function as it was")
	var ownerName string
	require.NoError(t, owner.QueryRow(ctx, "SELECT current_user::text").Scan(&ownerName))
	names := shadowNames(t, ctx, owner, login)
	for _, mode := range shadowModes {
		ran, errs := attackDefiners(t, ctx, appURL, mode, names, fx[mode])
		t.Logf("%s: on 00016's definitions the calls ended with %v", mode, errs)
		if mode == "functions" { // pg_temp is never searched for functions
			require.Empty(t, ran, mode)
			continue
		}
		require.NotEmpty(t, ran, "%s: the attack does not reach 00016's definer functions", mode)
		for _, r := range ran {
			require.True(t, strings.HasSuffix(r, " as "+ownerName), "%s: %s", mode, r)
		}
		t.Logf("%s: on 00016's definitions, ran %s", mode, strings.Join(ran, ", "))
	}

	require.NoError(t, store.MigrateUp(ctx, url))
	require.Equal(t, after, functionDefs(t, ctx, owner), "00025 applies again after its Down")
}

func ownerPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// definerLogin makes a login that is a member of contextd_app only, as
// serve's, and returns it and its URL. It may create temporary objects:
// the attacks are of the definer functions' search_path, not of TEMP.
func definerLogin(t *testing.T, ctx context.Context, owner *pgxpool.Pool, url string) (string, string) {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	login := "contextd_test_definer_" + hex.EncodeToString(b)
	appURL, err := store.EnsureLogin(ctx, url, login)
	require.NoError(t, err)
	user, super, own, err := store.Standing(ctx, appURL)
	require.NoError(t, err)
	require.False(t, super || own, user)
	var temp bool
	require.NoError(t, owner.QueryRow(ctx, "SELECT has_database_privilege($1, current_database(), 'TEMPORARY')", login).Scan(&temp))
	if !temp {
		_, err := owner.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN EXECUTE format('GRANT TEMPORARY ON DATABASE %%I TO %s', current_database()); END $$`,
			pgx.Identifier{login}.Sanitize()))
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_, _ = owner.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN EXECUTE format('REVOKE ALL ON DATABASE %%I FROM %s', current_database()); END $$`,
			pgx.Identifier{login}.Sanitize()))
		// A closed session's temporary objects go as its backend exits,
		// which may be a moment after the close.
		var err error
		for range 50 {
			if _, err = owner.Exec(ctx, "DROP ROLE "+pgx.Identifier{login}.Sanitize()); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("drop role %s: %v", login, err)
	})
	return login, appURL
}

// requireDefinersCovered: the definer functions of the database are
// exactly those of definerCalls.
func requireDefinersCovered(t *testing.T, ctx context.Context, owner *pgxpool.Pool) {
	t.Helper()
	var defs []string
	require.NoError(t, owner.QueryRow(ctx, `SELECT coalesce(array_agg(p.oid::regprocedure::text), '{}') FROM pg_proc p
		WHERE p.prosecdef AND p.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)`).Scan(&defs))
	slices.Sort(defs)
	require.Equal(t, slices.Sorted(maps.Keys(definerCalls)), defs,
		"a SECURITY DEFINER function this test does not attack (or one it names that is gone): add it to definerCalls")
}

// requirePinned: every definer function, and every trigger function of a
// table of public (any can be written by a definer function), pins
// pinnedPath; PUBLIC may execute no definer function, contextd_app every
// one.
func requirePinned(t *testing.T, ctx context.Context, owner *pgxpool.Pool) {
	t.Helper()
	rows, err := owner.Query(ctx, `
		SELECT p.oid::regprocedure::text, coalesce(p.proconfig, '{}'), p.prosecdef,
		       p.prosecdef AND (p.proacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0)),
		       has_function_privilege('contextd_app', p.oid, 'EXECUTE')
		FROM pg_proc p
		WHERE (p.prosecdef AND p.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace))
		   OR p.oid IN (SELECT g.tgfoid FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
		                WHERE NOT g.tgisinternal AND c.relnamespace = 'public'::regnamespace)
		ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close() // a failed check must not leave the pool waiting for these rows
	n := 0
	for rows.Next() {
		var fn string
		var config []string
		var definer, public, app bool
		require.NoError(t, rows.Scan(&fn, &config, &definer, &public, &app))
		require.Contains(t, config, pinnedPath, "%s does not pin its search_path", fn)
		if definer {
			require.False(t, public, "PUBLIC may execute %s", fn)
			require.True(t, app, "contextd_app may not execute %s", fn)
		}
		n++
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, n, len(definerCalls)+1)
}

// requireNoCreate: the login may create nothing in schema public, or a
// schema in the database.
func requireNoCreate(t *testing.T, ctx context.Context, owner *pgxpool.Pool, login string) {
	t.Helper()
	var schema, db bool
	require.NoError(t, owner.QueryRow(ctx, `SELECT has_schema_privilege($1, 'public', 'CREATE'),
		has_database_privilege($1, current_database(), 'CREATE')`, login).Scan(&schema, &db))
	require.False(t, schema, "%s may create in schema public", login)
	require.False(t, db, "%s may create schemas in the database", login)
}

// functionDefs are the definitions, settings and privileges of the
// functions of public (btree_gin's aside), by regprocedure.
func functionDefs(t *testing.T, ctx context.Context, owner *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := owner.Query(ctx, `
		SELECT p.oid::regprocedure::text,
		       concat_ws(E'\n', pg_get_functiondef(p.oid), p.proconfig::text, p.proacl::text)
		FROM pg_proc p
		WHERE p.pronamespace = 'public'::regnamespace AND p.prokind = 'f'
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')`)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var fn, def string
		require.NoError(t, rows.Scan(&fn, &def))
		out[fn] = def
	}
	require.NoError(t, rows.Err())
	return out
}

// definerFixtures makes, through the services, a fixture per name: a
// project, its items secret and decoy, a packet that included both, and a
// redaction of secret's version 1 that no definer function has carried out.
func definerFixtures(t *testing.T, ctx context.Context, owner *pgxpool.Pool, names []string) map[string]definerFixture {
	t.Helper()
	a := app.New(store.New(owner, pgtest.AcquireTimeout))
	admin, _, err := a.Agents.Bootstrap(ctx)
	require.NoError(t, err)
	out := map[string]definerFixture{}
	for _, n := range names {
		f := definerFixture{Project: "p-" + n, Redaction: ident.New("red"), Secret: "the secret of this fixture is hunter2-" + n, Decoy: "the decoy stays-" + n}
		_, _, err := a.Projects.Put(ctx, admin, f.Project, "")
		require.NoError(t, err)
		_, err = a.Items.Put(ctx, admin, f.Project, item.Input{Key: "secret", Content: f.Secret}, item.PutOpts{})
		require.NoError(t, err)
		_, err = a.Items.Put(ctx, admin, f.Project, item.Input{Key: "decoy", Content: f.Decoy}, item.PutOpts{})
		require.NoError(t, err)
		p, err := a.Packets.Assemble(ctx, admin, f.Project, &ctxtype.Request{TargetRole: "planner"})
		require.NoError(t, err)
		require.Contains(t, p.Rendered, f.Secret)
		require.Contains(t, p.Rendered, f.Decoy)
		f.Packet = p.ID
		_, err = owner.Exec(ctx, `INSERT INTO redactions (project, id, key, version, reason, created_by, created_at)
			VALUES ($1, $2, 'secret', 1, 'leaked', $3, now())`, f.Project, f.Redaction, admin.ID)
		require.NoError(t, err)
		out[n] = f
	}
	return out
}

// shadows are the names an attack shadows: every relation of public (and
// whether login may read it), every function named by a function of public
// or being one, and every type a definer function or a table of public
// uses. defined are the function names the definer functions name, which
// must each get a pg_temp function.
type shadows struct {
	relations map[string]bool
	functions []string
	defined   []string
	types     map[string]string // name: what its domain is over
	all       []string
}

var callRE = regexp.MustCompile(`(?i)\b([a-z_][a-z0-9_]*)\s*\(`)

func shadowNames(t *testing.T, ctx context.Context, owner *pgxpool.Pool, login string) shadows {
	t.Helper()
	s := shadows{relations: map[string]bool{}, types: map[string]string{}}
	rows, err := owner.Query(ctx, `SELECT c.relname::text, has_table_privilege($1, c.oid, 'SELECT') FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p', 'f')`, login)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		var readable bool
		require.NoError(t, rows.Scan(&name, &readable))
		s.relations[name] = readable
	}
	require.NoError(t, rows.Err())

	var sources, definerSources, own []string
	require.NoError(t, owner.QueryRow(ctx, `
		SELECT coalesce(array_agg(p.prosrc), '{}'), coalesce(array_agg(p.prosrc) FILTER (WHERE p.prosecdef), '{}'),
		       coalesce(array_agg(DISTINCT p.proname::text), '{}')
		FROM pg_proc p
		WHERE p.pronamespace = 'public'::regnamespace
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')`).
		Scan(&sources, &definerSources, &own))
	called := func(srcs []string) []string {
		var out []string
		for _, src := range srcs {
			for _, m := range callRE.FindAllStringSubmatch(src, -1) {
				out = append(out, strings.ToLower(m[1]))
			}
		}
		return out
	}
	// Only names PostgreSQL has a function of (not IN, VALUES, greatest...).
	existing := func(names []string) []string {
		var out []string
		require.NoError(t, owner.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT p.proname::text ORDER BY p.proname::text), '{}') FROM pg_proc p
			WHERE p.proname = ANY($1) AND p.pronamespace IN ('pg_catalog'::regnamespace, 'public'::regnamespace)`, names).Scan(&out))
		return out
	}
	s.functions = existing(append(called(sources), own...))
	s.defined = existing(called(definerSources))
	require.Contains(t, s.defined, "set_config")

	// The types: of the definer functions' arguments and results, of the
	// columns of public's relations, the relations' own row types, and
	// those the definer functions name.
	rows, err = owner.Query(ctx, `
		SELECT DISTINCT t.typname::text,
		       CASE WHEN t.typtype = 'p' THEN 'pg_catalog.int4' ELSE format('%I.%I', n.nspname, t.typname) END
		FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
		WHERE t.oid IN (SELECT a.atttypid FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		                WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p', 'f') AND a.attnum > 0)
		   OR t.oid IN (SELECT unnest(p.proargtypes::oid[] || p.prorettype) FROM pg_proc p WHERE p.prosecdef)
		   OR (n.nspname = 'public' AND t.typrelid <> 0)
		   OR (n.nspname = 'pg_catalog' AND t.typname IN ('text', 'bytea', 'int4', 'name', 'json', 'bool', 'record', 'void', 'regconfig'))`)
	require.NoError(t, err)
	for rows.Next() {
		var name, base string
		require.NoError(t, rows.Scan(&name, &base))
		s.types[name] = base
	}
	require.NoError(t, rows.Err())
	s.types["integer"] = "pg_catalog.int4"
	require.Contains(t, s.types, "redactions")
	require.Contains(t, s.types, "bytea")

	all := map[string]bool{}
	for n := range s.relations {
		all[n] = true
	}
	for _, n := range s.functions {
		all[n] = true
	}
	for n := range s.types {
		all[n] = true
	}
	s.all = slices.Sorted(maps.Keys(all))
	return s
}

// attackDefiners shadows every name in mode on a new connection of the
// login at appURL, calls every definer function on f, and returns what the
// shadows' code recorded ("what as whom") and each call's error.
func attackDefiners(t *testing.T, ctx context.Context, appURL, mode string, s shadows, f definerFixture) ([]string, map[string]error) {
	t.Helper()
	cfg, err := pgx.ParseConfig(appURL)
	require.NoError(t, err)
	// A notice is sent as it is raised, so it tells even of a call that
	// failed after the shadow ran (and took the setting and the row back).
	var ran []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if what, ok := strings.CutPrefix(n.Message, "hijacked: "); ok {
			ran = append(ran, what)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	a := attacker{t: t, ctx: ctx, conn: conn}
	// evil records that it ran, and as whom, in a notice, a setting of the
	// session and a table; it names no type or function a shadow could
	// take.
	a.exec(`CREATE TEMP TABLE evil_log (what pg_catalog.text, who pg_catalog.text)`)
	a.exec(`GRANT ALL ON pg_temp.evil_log TO PUBLIC`)
	a.exec(`CREATE FUNCTION pg_temp.evil(what pg_catalog.text) RETURNS pg_catalog.bool
		LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
		BEGIN
			RAISE NOTICE 'hijacked: % as %', what, current_user;
			PERFORM pg_catalog.set_config('test.hijacked',
				pg_catalog.concat(pg_catalog.current_setting('test.hijacked', true), what, ' as ', current_user, '; '), false);
			INSERT INTO pg_temp.evil_log VALUES (what, current_user);
			RETURN true;
		END $$`)
	a.exec(`CREATE FUNCTION pg_temp.evil_trigger() RETURNS trigger
		LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
		BEGIN
			PERFORM pg_temp.evil(pg_catalog.concat('a trigger on temporary table ', TG_TABLE_NAME));
			RETURN NULL;
		END $$`)
	switch mode {
	case "views":
		a.shadowViews(s)
	case "tables":
		a.shadowTables(s)
	case "types":
		a.shadowTypes(s)
	case "functions":
		a.shadowFunctions(s)
	default:
		t.Fatalf("mode %s", mode)
	}

	errs := map[string]error{}
	for _, fn := range slices.Sorted(maps.Keys(definerCalls)) {
		sql, args := definerCalls[fn](f)
		_, errs[fn] = conn.Exec(ctx, sql, args...)
	}
	var hijacked string
	require.NoError(t, conn.QueryRow(ctx, "SELECT coalesce(current_setting('test.hijacked', true), '')").Scan(&hijacked))
	rows, err := conn.Query(ctx, "SELECT what || ' as ' || who FROM pg_temp.evil_log")
	require.NoError(t, err)
	logged, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for r := range strings.SplitSeq(hijacked, "; ") {
		if r != "" {
			logged = append(logged, r)
		}
	}
	for _, r := range logged {
		require.Contains(t, ran, r, "recorded but not told")
	}
	return ran, errs
}

// attacker is the login's session that shadows names.
type attacker struct {
	t    *testing.T
	ctx  context.Context
	conn *pgx.Conn
}

func (a attacker) exec(sql string) {
	a.t.Helper()
	_, err := a.conn.Exec(a.ctx, sql)
	require.NoError(a.t, err, sql)
}

func sqlIdent(n string) string { return pgx.Identifier{n}.Sanitize() }

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// shadowViews: a temporary view of every name, which calls evil as it is
// read (a relation's view reads the relation, so it can stand in for it).
func (a attacker) shadowViews(s shadows) {
	for _, n := range s.all {
		if s.relations[n] {
			a.exec(fmt.Sprintf("CREATE TEMP VIEW %s AS SELECT * FROM public.%s WHERE pg_temp.evil(%s)", sqlIdent(n), sqlIdent(n), literal("temporary view "+n)))
		} else {
			a.exec(fmt.Sprintf("CREATE TEMP VIEW %s AS SELECT pg_temp.evil(%s) AS evil", sqlIdent(n), literal("temporary view "+n)))
		}
	}
}

// shadowTables: a temporary table of every name (a relation's with its
// rows), whose trigger calls evil as it is written; the redactions row
// names the decoy, a redaction of the login's choosing.
func (a attacker) shadowTables(s shadows) {
	for _, n := range s.all {
		if s.relations[n] {
			a.exec(fmt.Sprintf("CREATE TEMP TABLE %s (LIKE public.%s)", sqlIdent(n), sqlIdent(n)))
			a.exec(fmt.Sprintf("INSERT INTO pg_temp.%s SELECT * FROM public.%s", sqlIdent(n), sqlIdent(n)))
		} else {
			a.exec(fmt.Sprintf("CREATE TEMP TABLE %s (evil integer)", sqlIdent(n)))
		}
	}
	a.exec("UPDATE pg_temp.redactions SET key = 'decoy'")
	for _, n := range s.all {
		a.exec(fmt.Sprintf("CREATE TRIGGER evil BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON pg_temp.%s FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.evil_trigger()",
			sqlIdent(n)))
	}
}

// shadowTypes: a domain of every name, over the type it shadows (int4 for
// a pseudo-type or a name of no type), whose check calls evil.
func (a attacker) shadowTypes(s shadows) {
	for _, n := range s.all {
		base, ok := s.types[n]
		if !ok && s.relations[n] {
			base = "public." + sqlIdent(n)
		} else if !ok {
			base = "pg_catalog.int4"
		}
		a.exec(fmt.Sprintf("CREATE DOMAIN pg_temp.%s AS %s CHECK (pg_temp.evil(%s))", sqlIdent(n), base, literal("domain "+n)))
	}
}

// shadowFunctions: a pg_temp function of every signature of every function
// name, which calls evil.
func (a attacker) shadowFunctions(s shadows) {
	type sig struct {
		args, result string
		void         bool
	}
	made := map[string]bool{}
	for _, n := range s.functions {
		rows, err := a.conn.Query(a.ctx, `SELECT pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid), p.prorettype = 'void'::regtype
			FROM pg_proc p WHERE p.proname = $1 AND p.prokind = 'f' AND NOT p.proretset
			AND p.pronamespace IN ('pg_catalog'::regnamespace, 'public'::regnamespace)`, n)
		require.NoError(a.t, err)
		sigs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sig, error) {
			var g sig
			return g, r.Scan(&g.args, &g.result, &g.void)
		})
		require.NoError(a.t, err)
		for _, g := range sigs {
			ret := " NULL"
			if g.void {
				ret = ""
			}
			// Some signatures have types plpgsql takes no argument of
			// (internal, cstring, "any"): those are left out.
			_, err := a.conn.Exec(a.ctx, fmt.Sprintf("CREATE FUNCTION pg_temp.%s(%s) RETURNS %s LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_temp.evil(%s); RETURN%s; END $$",
				sqlIdent(n), g.args, g.result, literal("function pg_temp."+n), ret))
			made[n] = made[n] || err == nil
		}
	}
	for _, n := range s.defined {
		require.True(a.t, made[n], "no pg_temp function shadows %s", n)
	}
}

// checkDefinerWork: the definer functions redacted the real rows of f, the
// secret's version and its chain entry, the packet and its entry, and
// left the decoy alone.
func checkDefinerWork(t *testing.T, ctx context.Context, owner *pgxpool.Pool, f definerFixture) {
	t.Helper()
	var content string
	var zeros bool
	require.NoError(t, owner.QueryRow(ctx, `SELECT content, content_sha256 = '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea
		FROM item_versions WHERE project = $1 AND key = 'secret' AND version = 1`, f.Project).Scan(&content, &zeros))
	require.Equal(t, "[redacted]", content)
	require.True(t, zeros)
	require.NoError(t, owner.QueryRow(ctx, `SELECT content FROM item_versions WHERE project = $1 AND key = 'decoy' AND version = 1`, f.Project).Scan(&content))
	require.Equal(t, f.Decoy, content)

	entry := func(kind, subject string) string {
		var body string
		require.NoError(t, owner.QueryRow(ctx, `SELECT convert_from(body, 'UTF8') FROM audit_entries WHERE chain = $1 AND kind = $2 AND subject = $3`,
			f.Project, kind, subject).Scan(&body))
		return body
	}
	redacted := `"redacted":"` + f.Redaction + `"`
	require.Contains(t, entry("item_version", "secret@1"), redacted)
	require.NotContains(t, entry("item_version", "decoy@1"), `"redacted"`)
	require.Contains(t, entry("packet", f.Packet), redacted)

	var rendered string
	var hashed bool
	require.NoError(t, owner.QueryRow(ctx, `SELECT rendered, rendered_sha256 = sha256(convert_to(rendered, 'UTF8')) FROM packets WHERE project = $1 AND id = $2`,
		f.Project, f.Packet).Scan(&rendered, &hashed))
	require.NotContains(t, rendered, f.Secret)
	require.Contains(t, rendered, "[redacted "+f.Redaction+"]")
	require.Contains(t, rendered, f.Decoy)
	require.True(t, hashed, "the packet's stored hash is its new text's")

	var terms []string
	require.NoError(t, owner.QueryRow(ctx, `SELECT coalesce(array_agg(term || ' ' || plain::text), '{}') FROM item_keyword_terms
		WHERE project = $1 AND key = 'decoy'`, f.Project).Scan(&terms))
	require.Equal(t, []string{f.Project + "\x1fhunter true"}, terms, "the trigger wrote the keyword item's term, as the owner")

	var lanes []string
	require.NoError(t, owner.QueryRow(ctx, `SELECT coalesce(array_agg(lane ORDER BY lane), '{}') FROM item_restricted
		WHERE project = $1 AND key = 'decoy'`, f.Project).Scan(&lanes))
	require.Equal(t, []string{"hunter_tool"}, lanes, "the trigger wrote the restricted tool item's row, as the owner")
}
