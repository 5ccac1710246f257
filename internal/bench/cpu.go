package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// A cpuMeter reads how much CPU this process and the PostgreSQL cluster
// have used so far, so that a phase's ops can be priced in CPU: on a
// machine whose cores a run saturates, a ratio of throughputs is a ratio
// of CPU per op, and the split says whose CPU it is. The cluster's share
// is the sum over the processes pg_stat_activity lists (every backend and
// background process), read from /proc, so it is known only for a cluster
// on this machine (reached over loopback or a Unix socket) and a reader
// allowed to see its processes' stat files.
type cpuMeter struct {
	conn *pgx.Conn // nil: the cluster's share is not measured
	// process is whether this process's own CPU means the server's
	// (contextd in this process, not --url).
	process bool
}

// cpuSample is the CPU used so far; a part that is not known is -1.
type cpuSample struct{ process, postgres time.Duration }

// clockTicks is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on
// every Linux architecture Go supports).
const clockTicks = 100

// openCPUMeter opens the meter's connection when the cluster is local; a
// cluster elsewhere, or one it may not ask, leaves the cluster's share
// unmeasured rather than failing the run.
func openCPUMeter(ctx context.Context, dbURL string, process bool) *cpuMeter {
	m := &cpuMeter{process: process}
	if dbURL == "" {
		return m
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return m
	}
	var local bool
	err = conn.QueryRow(ctx, `SELECT coalesce(inet_server_addr() <<= '127.0.0.0/8'::inet OR inet_server_addr() = '::1'::inet, true)`).Scan(&local)
	if err != nil || !local {
		_ = conn.Close(ctx)
		return m
	}
	m.conn = conn
	if _, ok := m.postgres(ctx); !ok {
		_ = conn.Close(ctx)
		m.conn = nil
	}
	return m
}

func (m *cpuMeter) close() {
	if m != nil && m.conn != nil {
		_ = m.conn.Close(context.Background())
	}
}

// sample reads both shares now.
func (m *cpuMeter) sample(ctx context.Context) cpuSample {
	s := cpuSample{process: -1, postgres: -1}
	if m == nil {
		return s
	}
	if m.process {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			s.process = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if pg, ok := m.postgres(ctx); ok {
		s.postgres = pg
	}
	return s
}

// postgres sums the CPU of the cluster: of every process pg_stat_activity
// lists (all are the postmaster's children) and of the postmaster, with
// what its children that exited used (cutime, cstime: a backend's time
// moves there when the postmaster reaps it), so that the sum only grows
// while connections come and go. The postmaster is read first: a child
// reaped between the two reads is missing from this sample and counted in
// the next. False when a listed process is not a local postgres process
// whose stat this process may read.
func (m *cpuMeter) postgres(ctx context.Context) (time.Duration, bool) {
	if m.conn == nil {
		return 0, false
	}
	var self int32
	rows, err := m.conn.Query(ctx, `SELECT pid, pid = pg_backend_pid() FROM pg_stat_activity ORDER BY 2 DESC`)
	if err != nil {
		return 0, false
	}
	pids, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (int32, error) {
		var pid int32
		var mine bool
		err := row.Scan(&pid, &mine)
		if mine {
			self = pid
		}
		return pid, err
	})
	if err != nil || self == 0 {
		return 0, false
	}
	st, err := processStat(fmt.Sprintf("/proc/%d", self))
	if err != nil {
		return 0, false
	}
	pm, err := processStat(fmt.Sprintf("/proc/%d", st.ppid))
	if err != nil {
		return 0, false
	}
	ticks := pm.utime + pm.stime + pm.cutime + pm.cstime
	for _, pid := range pids {
		st, err := processStat(fmt.Sprintf("/proc/%d", pid))
		if errors.Is(err, fs.ErrNotExist) {
			continue // exited since the list: the postmaster's cutime has it, or will
		}
		if err != nil {
			return 0, false
		}
		ticks += st.utime + st.stime
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// procStat is what the meter reads of /proc/<pid>/stat, in clock ticks.
type procStat struct {
	ppid                         int64
	utime, stime, cutime, cstime int64
}

// processStat reads the stat of the process at dir (/proc/<pid>), which
// must be a postgres process.
func processStat(dir string) (procStat, error) {
	comm, err := os.ReadFile(dir + "/comm")
	if err != nil {
		return procStat{}, err
	}
	if string(bytes.TrimSpace(comm)) != "postgres" {
		return procStat{}, fmt.Errorf("%s is %q, not postgres", dir, bytes.TrimSpace(comm))
	}
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(stat)
}

// parseStat reads ppid (field 4) and utime, stime, cutime and cstime
// (fields 14 to 17) of a /proc/<pid>/stat line; the command (field 2) is
// in parentheses and may hold spaces, so fields are counted after its
// closing one.
func parseStat(stat []byte) (procStat, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return procStat{}, io.ErrUnexpectedEOF
	}
	f := bytes.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procStat{}, io.ErrUnexpectedEOF
	}
	var v [5]int64
	for k, field := range []int{4, 14, 15, 16, 17} {
		n, err := strconv.ParseInt(string(f[field-3]), 10, 64)
		if err != nil {
			return procStat{}, err
		}
		v[k] = n
	}
	return procStat{ppid: v[0], utime: v[1], stime: v[2], cutime: v[3], cstime: v[4]}, nil
}

// CPUPerOp is the CPU a system's phases used per op, in ms: this process
// (server and load generator, or the floor's program and the load
// generator) and the PostgreSQL cluster. A share that was not measured
// is null.
type CPUPerOp struct {
	ProcessMS  *float64 `json:"process_ms"`
	PostgresMS *float64 `json:"postgres_ms"`
}

// cpuPerOp adds up system's phases.
func cpuPerOp(phases []Phase, system string) *CPUPerOp {
	var ops int
	var proc, pg float64
	procOK, pgOK := true, true
	for _, p := range phases {
		if p.System != system {
			continue
		}
		ops += p.Ops
		if p.CPUProcessMS == nil {
			procOK = false
		} else {
			proc += *p.CPUProcessMS
		}
		if p.CPUPostgresMS == nil {
			pgOK = false
		} else {
			pg += *p.CPUPostgresMS
		}
	}
	if ops == 0 || (!procOK && !pgOK) {
		return nil
	}
	out := &CPUPerOp{}
	if procOK {
		v := round(proc/float64(ops), 2)
		out.ProcessMS = &v
	}
	if pgOK {
		v := round(pg/float64(ops), 2)
		out.PostgresMS = &v
	}
	return out
}

// cpuOf is contextd's and the floor's CPU per call over phases (nil when
// neither was measured).
func cpuOf(phases []Phase) map[string]*CPUPerOp {
	var out map[string]*CPUPerOp
	for _, system := range []string{"contextd", OpFloor} {
		if c := cpuPerOp(phases, system); c != nil {
			if out == nil {
				out = map[string]*CPUPerOp{}
			}
			out[system] = c
		}
	}
	return out
}

// phaseCPU sets p's CPU from the samples at its start and end.
func phaseCPU(p *Phase, a, b cpuSample) {
	if a.process >= 0 && b.process >= 0 {
		v := round(float64((b.process-a.process).Microseconds())/1000, 1)
		p.CPUProcessMS = &v
	}
	if a.postgres >= 0 && b.postgres >= 0 {
		v := round(float64((b.postgres-a.postgres).Microseconds())/1000, 1)
		p.CPUPostgresMS = &v
	}
}

// String is "5.06 ms in this process + 5.87 ms in PostgreSQL", with "?"
// for a share not measured.
func (c *CPUPerOp) String() string {
	if c == nil {
		return "not measured"
	}
	f := func(v *float64) string {
		if v == nil {
			return "?"
		}
		return strconv.FormatFloat(*v, 'f', 2, 64)
	}
	return fmt.Sprintf("%s ms in this process + %s ms in PostgreSQL", f(c.ProcessMS), f(c.PostgresMS))
}
