package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AppRole is the role whose privileges a server needs (migration 00013);
// ServerLogin is the login the embedded default makes for its server.
const (
	AppRole     = "contextd_app"
	ServerLogin = "contextd_server"
)

// EnsureLogin makes login, a member of AppRole and nothing else, with the
// owner's connection at ownerURL, and returns ownerURL with login as its
// user: the embedded default's server connects with it.
func EnsureLogin(ctx context.Context, ownerURL, login string) (string, error) {
	conn, err := pgx.Connect(ctx, ownerURL)
	if err != nil {
		return "", fmt.Errorf("make login %s: %w", login, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{login}.Sanitize()+" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS IN ROLE "+AppRole)
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505")) { // duplicate_object: made before
		return "", fmt.Errorf("make login %s: %w", login, err)
	}
	u, err := url.Parse(ownerURL)
	if err != nil {
		return "", err
	}
	u.User = url.User(login)
	return u.String(), nil
}

// Standing says what the login at databaseURL may do beyond AppRole: a
// superuser may switch triggers off for its session; an owner of the
// tables (or a member of the owner) may disable their triggers and
// replace their functions. Either can rewrite history; the audit chain,
// its checkpoints and the state check are then the only guard.
func Standing(ctx context.Context, databaseURL string) (user string, superuser, owner bool, err error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return "", false, false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = conn.QueryRow(ctx, `SELECT current_user::text, r.rolsuper,
		coalesce(pg_has_role(current_user, (SELECT tableowner FROM pg_tables WHERE schemaname = 'public' AND tablename = 'item_versions'), 'MEMBER'), false)
		FROM pg_roles r WHERE r.rolname = current_user`).Scan(&user, &superuser, &owner)
	return user, superuser, owner, err
}

// AppGrants lists the privileges AppRole holds in the database at
// databaseURL, as GRANT statements, for `contextd migrate` to print.
func AppGrants(ctx context.Context, databaseURL string) ([]string, error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
		SELECT table_name::text, privilege_type::text, '' FROM information_schema.role_table_grants
		WHERE grantee = $1 AND table_schema = 'public'
		UNION ALL
		SELECT c.table_name::text, c.privilege_type::text, c.column_name::text FROM information_schema.column_privileges c
		WHERE c.grantee = $1 AND c.table_schema = 'public' AND NOT EXISTS (
			SELECT 1 FROM information_schema.role_table_grants t
			WHERE t.grantee = $1 AND t.table_schema = 'public' AND t.table_name = c.table_name AND t.privilege_type = c.privilege_type)
		ORDER BY 1, 2, 3`, AppRole)
	if err != nil {
		return nil, err
	}
	type grant struct{ table, priv string }
	cols := map[grant][]string{}
	var order []grant
	for rows.Next() {
		var g grant
		var col string
		if err := rows.Scan(&g.table, &g.priv, &col); err != nil {
			return nil, err
		}
		if _, ok := cols[g]; !ok {
			order = append(order, g)
		}
		if col != "" {
			cols[g] = append(cols[g], col)
		} else if cols[g] == nil {
			cols[g] = []string{}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []string
	for _, g := range order {
		priv := g.priv
		if c := cols[g]; len(c) > 0 {
			slices.Sort(c)
			priv += " (" + strings.Join(c, ", ") + ")"
		}
		out = append(out, fmt.Sprintf("GRANT %s ON %s TO %s;", priv, g.table, AppRole))
	}
	return out, nil
}
