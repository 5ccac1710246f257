package store_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// lockedBuffer is a bytes.Buffer for a logger written from another goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A LISTEN connection that is lost is logged once, reconnects, is logged
// back, and hears notifications again.
func TestListenLogsALostConnectionAndItsReturn(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	url := pgtest.NewURL(t)
	st, err := store.Open(t.Context(), store.Config{URL: url, AcquireTimeout: pgtest.AcquireTimeout,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	require.NoError(t, err)
	defer st.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	connects, heard := 0, []string{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		st.Listen(ctx, "contextd_test",
			func() { mu.Lock(); connects++; mu.Unlock() },
			func(p string) { mu.Lock(); heard = append(heard, p); mu.Unlock() }, nil)
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return connects }
	require.Eventually(t, func() bool { return count() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.NotContains(t, buf.String(), "LISTEN connection", "a first connect is not news")

	other, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer other.Close(context.Background())
	_, err = other.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, store.ListenerName("contextd_test"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return count() == 2 }, 10*time.Second, 10*time.Millisecond, "it reconnects")
	require.Eventually(t, func() bool { return strings.Contains(buf.String(), "LISTEN connection back") }, 5*time.Second, 10*time.Millisecond)
	log := buf.String()
	require.Equal(t, 1, strings.Count(log, "LISTEN connection lost; reconnecting"), log)
	require.Contains(t, log, "level=WARN")
	require.Contains(t, log, "channel=contextd_test")

	_, err = other.Exec(ctx, `SELECT pg_notify('contextd_test', 'after')`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(heard) == 1 && heard[0] == "after" }, 5*time.Second, 10*time.Millisecond)
	cancel()
	<-done
	require.Equal(t, 1, strings.Count(buf.String(), "LISTEN connection lost"), "an end by its context is not a loss")
}
