package store_test

import (
	"runtime"
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// The pool's size is what --db-max-conns says, else the URL's
// pool_max_conns, else 4 per core and at least 8 (not pgxpool's max(4,
// cores), which left 8 agents queueing on 4 connections on 2 cores).
func TestPoolSize(t *testing.T) {
	t.Parallel()
	def := int32(max(8, 4*runtime.NumCPU()))
	for _, c := range []struct {
		cfg  store.Config
		want int32
	}{
		{store.Config{URL: "postgres://u@h/db"}, def},
		{store.Config{URL: "postgres://u@h/db", MaxConns: 3}, 3},
		{store.Config{URL: "postgres://u@h/db?pool_max_conns=5"}, 5},
		{store.Config{URL: "host=h user=u dbname=db pool_max_conns=6"}, 6},
		{store.Config{URL: "postgres://u@h/db?pool_max_conns=5", MaxConns: 2}, 2},
	} {
		if got := store.PoolSize(c.cfg); got != c.want {
			t.Errorf("%+v: pool of %d, want %d", c.cfg, got, c.want)
		}
	}
}
