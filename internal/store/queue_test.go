package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// TestBusyPoolQueues: requests wait their turn for as long as the pool
// keeps handing connections out, however much longer than the acquire
// timeout that is, and fail fast only once it stops.
func TestBusyPoolQueues(t *testing.T) {
	t.Parallel()
	pc, err := pgxpool.ParseConfig(pgtest.NewURL(t))
	require.NoError(t, err)
	pc.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	const acquire = 100 * time.Millisecond
	st := store.New(pool, acquire)

	// Four other users of the pool take its one connection for 40 ms at a
	// time, again and again: the pool is busy (a request queues behind
	// ~160 ms of them), never stuck (a connection is handed out every
	// 40 ms).
	stop := make(chan struct{})
	var busy sync.WaitGroup
	for range 4 {
		busy.Add(1)
		go func() {
			defer busy.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := pool.Acquire(t.Context())
				if err != nil {
					return
				}
				time.Sleep(40 * time.Millisecond)
				c.Release()
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		longest time.Duration
		errs    []error
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := st.InTx(t.Context(), func(*store.Tx) error { return nil })
			mu.Lock()
			defer mu.Unlock()
			longest = max(longest, time.Since(start))
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	busy.Wait()
	require.Empty(t, errs, "a busy pool queues")
	require.Greater(t, longest, acquire, "some waited longer than the acquire timeout, and got their turn")

	// Held, the connection is handed out to nobody: unavailable soon after
	// the acquire timeout.
	c, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	defer c.Release()
	start := time.Now()
	err = st.InTx(t.Context(), func(*store.Tx) error { return nil })
	require.True(t, errors.Is(err, fault.ErrUnavailable), "%v", err)
	require.ErrorContains(t, err, "pool exhausted")
	require.Less(t, time.Since(start), 5*time.Second, "not queued for MaxQueueWait")
}
