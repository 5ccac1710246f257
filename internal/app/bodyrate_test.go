package app_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
)

// The minimum body rate is on by default (1 KiB/s after 10 s), set by
// --min-body-rate and --min-body-rate-grace or CONTEXTD_MIN_BODY_RATE, and
// 0 turns it off.
func TestMinBodyRateSettings(t *testing.T) {
	c, err := parse(t)
	require.NoError(t, err)
	require.Equal(t, int64(app.DefaultMinBodyRate), c.MinBodyRate)
	require.Equal(t, int64(1024), c.MinBodyRate)
	require.Equal(t, 10*time.Second, c.MinBodyRateGrace)

	c, err = parse(t, "--min-body-rate=4096", "--min-body-rate-grace=3s")
	require.NoError(t, err)
	require.Equal(t, int64(4096), c.MinBodyRate)
	require.Equal(t, 3*time.Second, c.MinBodyRateGrace)

	_, err = parse(t, "--min-body-rate=0", "--min-body-rate-grace=0s")
	require.NoError(t, err, "no minimum needs no grace period")

	t.Setenv("CONTEXTD_MIN_BODY_RATE", "0")
	c, err = parse(t)
	require.NoError(t, err)
	require.Zero(t, c.MinBodyRate, "from the environment")

	t.Setenv("CONTEXTD_MIN_BODY_RATE", "fast")
	_, err = parse(t)
	require.ErrorContains(t, err, "CONTEXTD_MIN_BODY_RATE")
}

// A negative rate, or a rate with no grace period (which would cut every
// body before its first byte), fails naming the flag.
func TestMinBodyRateGuards(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--min-body-rate=-1"}, "--min-body-rate: must not be negative"},
		{[]string{"--min-body-rate-grace=0s"}, "--min-body-rate-grace: must be positive"},
		{[]string{"--min-body-rate-grace=-1s"}, "--min-body-rate-grace: must be positive"},
	} {
		_, err := parse(t, c.args...)
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
}
