package app_test

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
)

// parse registers the flags on a set of their own and parses args.
func parse(t *testing.T, args ...string) (*app.Config, error) {
	t.Helper()
	var c app.Config
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse(args))
	return &c, c.Validate()
}

// The timeouts reach the http.Server, defaults included: a server built
// without them would keep trickled bodies and unread answers forever.
func TestHTTPServerTimeouts(t *testing.T) {
	t.Parallel()
	c, err := parse(t)
	require.NoError(t, err)
	srv := c.HTTPServer(nil)
	require.Equal(t, app.DefaultReadHeaderTimeout, srv.ReadHeaderTimeout)
	require.Equal(t, app.DefaultReadTimeout, srv.ReadTimeout)
	require.Equal(t, app.DefaultWriteTimeout, srv.WriteTimeout)
	require.Equal(t, app.DefaultIdleTimeout, srv.IdleTimeout)
	require.Zero(t, c.RateLimit, "no rate limit unless asked for")

	c, err = parse(t, "--read-header-timeout=2s", "--read-timeout=3s", "--write-timeout=45s", "--idle-timeout=4s", "--rate-limit=2.5", "--rate-burst=7")
	require.NoError(t, err)
	srv = c.HTTPServer(nil)
	require.Equal(t, []time.Duration{2 * time.Second, 3 * time.Second, 45 * time.Second, 4 * time.Second},
		[]time.Duration{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout})
	require.Equal(t, 2.5, c.RateLimit)
	require.Equal(t, 7, c.RateBurst)
}

func TestValidateGuards(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--read-timeout=-1s"}, "--read-timeout"},
		{[]string{"--read-header-timeout=5s", "--read-timeout=2s"}, "--read-header-timeout"},
		{[]string{"--write-timeout=20s"}, "--write-timeout: must be longer than --db-statement-timeout"},
		{[]string{"--rate-limit=-1"}, "--rate-limit"},
		{[]string{"--rate-limit=NaN"}, "--rate-limit"},
		{[]string{"--rate-burst=-2"}, "--rate-burst"},
	} {
		_, err := parse(t, c.args...)
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
	_, err := parse(t, "--write-timeout=0", "--read-timeout=0")
	require.NoError(t, err, "0 turns a timeout off")
	_, err = parse(t, "--write-timeout=20s", "--db-statement-timeout=10s")
	require.NoError(t, err)
}

// The rate limit may come from the environment; a malformed value is an
// error at start, not a limit silently off.
func TestRateLimitFromEnvironment(t *testing.T) {
	t.Setenv("CONTEXTD_RATE_LIMIT", "20")
	t.Setenv("CONTEXTD_RATE_BURST", "40")
	c, err := parse(t)
	require.NoError(t, err)
	require.Equal(t, 20.0, c.RateLimit)
	require.Equal(t, 40, c.RateBurst)

	t.Setenv("CONTEXTD_RATE_LIMIT", "lots")
	_, err = parse(t)
	require.ErrorContains(t, err, "CONTEXTD_RATE_LIMIT")
}
