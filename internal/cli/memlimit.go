package cli

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// setMemoryLimit gives the Go runtime a soft memory limit when the operator
// gave none: three quarters of the container's memory limit (cgroup v2
// memory.max, or v1 memory.limit_in_bytes), so the garbage collector works
// harder before the kernel kills the process instead of after. GOMEMLIMIT,
// when set, wins (the runtime has applied it already); with neither, the
// runtime's default (no limit) stays: a server alone on a machine then
// grows to what its work needs, which `contextd bench` measures (server RSS
// in its output; see docs/scale-out.md and docs/performance.md).
func setMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit, src := cgroupMemoryLimit()
	if limit <= 0 {
		return
	}
	soft := limit / 4 * 3
	debug.SetMemoryLimit(soft)
	log.Info("memory limit set from the container's", slog.String("source", src),
		slog.Int64("container_bytes", limit), slog.Int64("gomemlimit_bytes", soft))
}

// cgroupMemoryLimit reads the container's memory limit; 0 when there is
// none (unlimited, or not in a cgroup that says).
func cgroupMemoryLimit() (int64, string) {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if n := parseLimit(string(b)); n > 0 {
			return n, path
		}
	}
	return 0, ""
}

// parseLimit parses a cgroup limit: "max", or a byte count; cgroup v1's
// "unlimited" is a huge number, taken as none.
func parseLimit(s string) int64 {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0
	}
	return n
}
