package cli

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

// With --metrics-listen, /metrics is served there to anyone who reaches
// it, and not on the main listener.
func TestServeMetricsListen(t *testing.T) {
	t.Parallel()
	base, out, stop := serve(t, "--database-url", pgtest.NewURL(t), "--metrics-listen", "127.0.0.1:0", "--log-format", "json")
	defer stop()
	m := regexp.MustCompile(`metrics on (http://\S+)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	get := func(url, key string) (int, string) {
		req, err := http.NewRequest("GET", url, nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, _ := get(base+"/healthz", "")
	require.Equal(t, 200, code)
	code, text := get(m[1], "")
	require.Equal(t, 200, code)
	require.Contains(t, text, `contextd_http_request_duration_seconds_count{method="GET",route="/healthz",status="200"} 1`)
	require.Contains(t, text, "contextd_db_pool_max_connections")
	admin := keyRE.FindString(out.String())
	require.NotEmpty(t, admin)
	code, _ = get(base+"/metrics", admin)
	require.Equal(t, 404, code, "not on the main listener when it has one of its own")
	require.Equal(t, 0, stop())
}

// config check prints the effective configuration, masked, and fails
// naming an invalid setting.
func TestConfigCheck(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://app:pa55word@db:5432/contextd")
	out, errs, code := run(t, "config", "check", "--rate-limit", "2")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `database-url: "postgres://app:***@db:5432/contextd" # env DATABASE_URL`)
	require.Contains(t, out, `rate-limit: "2" # flag`)
	require.NotContains(t, out, "pa55word")
	_, errs, code = run(t, "config", "check", "--listen", "nowhere", "--limit", "pins=-3")
	require.Equal(t, 1, code)
	require.True(t, strings.Contains(errs, "--listen") && strings.Contains(errs, "--limit"), errs)
}
