package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

// serve --read-database-url reads history from the standby it names, and
// says so on /readyz and /metrics; a read URL that names no standby (the
// primary itself) is set aside, the server ready all the same.
func TestServeReadReplica(t *testing.T) {
	t.Parallel()
	sb := pgtest.NewStandby(t)
	readyReplica := func(base string) map[string]any {
		status, body := get(t, base+"/readyz", "")
		require.Equal(t, 200, status, body)
		var r struct {
			Replica map[string]any `json:"replica"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &r), body)
		return r.Replica
	}

	base, out, stop := serve(t, "--database-url", sb.PrimaryURL, "--read-database-url", sb.StandbyURL)
	key := keyRE.FindString(out.String())
	require.NotEmpty(t, key, out.String())
	sb.CatchUp(t)
	replica := readyReplica(base)
	require.Equal(t, true, replica["in_use"], replica)
	require.Contains(t, replica, "lag_bytes")
	status, body := get(t, base+"/v1/projects/_shared/audit/entries", key)
	require.Equal(t, 200, status, body)
	_, metrics := get(t, base+"/metrics", key)
	require.Contains(t, metrics, "contextd_db_replica_in_use 1")
	require.Regexp(t, `contextd_db_replica_reads_total [1-9]`, metrics, "the audit entries were read from the standby")
	require.Equal(t, 0, stop())

	base, _, stop = serve(t, "--database-url", sb.PrimaryURL, "--read-database-url", sb.PrimaryURL)
	replica = readyReplica(base)
	require.Equal(t, false, replica["in_use"], replica)
	require.Contains(t, replica["error"], "not a streaming standby")
	status, body = get(t, base+"/v1/projects/_shared/audit/entries", key)
	require.Equal(t, 200, status, body)
	require.Equal(t, 0, stop())
}
