package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	// A command in parentheses may hold spaces and parentheses itself.
	line := "4242 (postgres: a (b) c) S 17 4242 4242 0 -1 4194560 1 0 0 0 731 205 33 44 20 0 1 0 100 0 0\n"
	st, err := parseStat([]byte(line))
	require.NoError(t, err)
	require.Equal(t, procStat{ppid: 17, utime: 731, stime: 205, cutime: 33, cstime: 44}, st)
	for _, bad := range []string{"", "4242 (x S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 u 205 0 0"} {
		_, err := parseStat([]byte(bad))
		require.Error(t, err, bad)
	}
	// This process is not a postgres process: the meter refuses it.
	_, err = processStat(fmt.Sprintf("/proc/%d", os.Getpid()))
	require.ErrorContains(t, err, "not postgres")
}

func TestCPUPerOp(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	phases := []Phase{
		{System: "contextd", Ops: 10, CPUProcessMS: f(50), CPUPostgresMS: f(60)},
		{System: OpFloor, Ops: 30, CPUProcessMS: f(30), CPUPostgresMS: f(90)},
		{System: "contextd", Ops: 30, CPUProcessMS: f(150), CPUPostgresMS: f(180)},
		{System: OpFloor, Ops: 10, CPUProcessMS: f(10)},
	}
	c := cpuPerOp(phases, "contextd")
	require.InDelta(t, 5.0, *c.ProcessMS, 1e-9)
	require.InDelta(t, 6.0, *c.PostgresMS, 1e-9)
	fl := cpuPerOp(phases, OpFloor)
	require.InDelta(t, 1.0, *fl.ProcessMS, 1e-9)
	require.Nil(t, fl.PostgresMS, "a phase without the cluster's share leaves the sum unknown")
	require.Equal(t, "1.00 ms in this process + ? ms in PostgreSQL", fl.String())
	require.Nil(t, cpuPerOp(phases, "other"))
	require.Nil(t, cpuPerOp([]Phase{{System: "contextd", Ops: 3}}, "contextd"))
	require.Equal(t, "not measured", (*CPUPerOp)(nil).String())
}

// clusterIsLocal says, independently of cpuMeter, whether dbURL's server
// runs on this machine as processes this test may read: the meter must
// then price phases in the cluster's CPU.
func clusterIsLocal(t *testing.T, dbURL string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var pid int
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.TrimSpace(string(comm)) == "postgres"
}

// requireCPU checks a system's CPU per call: this process's always (the
// server runs in it), the cluster's when it is local, else none.
func requireCPU(t *testing.T, c *CPUPerOp, local bool, what string) {
	t.Helper()
	require.NotNil(t, c, what)
	require.NotNil(t, c.ProcessMS, what)
	require.Positive(t, *c.ProcessMS, what)
	if local {
		require.NotNil(t, c.PostgresMS, what)
		require.Positive(t, *c.PostgresMS, what)
	} else {
		require.Nil(t, c.PostgresMS, what)
	}
}
