package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A bucket refills at the rate, and says how long until it has a token.
func TestLimiterRefills(t *testing.T) {
	t.Parallel()
	l := newLimiter(10, 2)
	now := time.Unix(1000, 0)
	for range 2 {
		ok, _ := l.take("a", now)
		require.True(t, ok)
	}
	ok, wait := l.take("a", now)
	require.False(t, ok)
	require.InDelta(t, 100*time.Millisecond, wait, float64(time.Millisecond))
	ok, _ = l.take("b", now)
	require.True(t, ok, "another agent has a bucket of its own")
	ok, _ = l.take("a", now.Add(100*time.Millisecond))
	require.True(t, ok, "a token came back")
	require.Nil(t, newLimiter(0, 5), "rate 0: no limiter")
	require.Equal(t, 3, newLimiter(2.5, 0).burst, "burst 0: one second's worth")
}

// The map of buckets stays bounded: buckets full again are dropped, and
// past maxBuckets arbitrary ones too.
func TestLimiterIsBounded(t *testing.T) {
	t.Parallel()
	l := newLimiter(1, 1) // a bucket is full again after 1 s
	now := time.Unix(1000, 0)
	for i := range 100 {
		l.take(fmt.Sprint("idle-", i), now)
	}
	later := now.Add(2 * time.Second)
	l.take("new", later)
	require.Len(t, l.buckets, 1, "the idle buckets were full again, and dropped")

	for i := range 3 * maxBuckets {
		l.take(fmt.Sprint("busy-", i), later) // all within one idle period
		require.LessOrEqual(t, len(l.buckets), maxBuckets)
	}
}
