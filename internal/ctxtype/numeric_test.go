package ctxtype_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestPgNumericIsWhatJsonbStores: pgNumeric writes each number as
// PostgreSQL's jsonb prints it, for hand-picked edge cases and thousands
// of random ones, and refuses exactly those jsonb cannot hold or that
// would be over the limit once stored.
func TestPgNumericIsWhatJsonbStores(t *testing.T) {
	pool := pgtest.New(t)
	ns := []string{
		"0", "-0", "0.0", "-0.000", "0e5", "0e-5", "-0e10", "0.05e1", "1", "-1", "10", "1.50", "1e2", "1E2", "1e+2", "1.5e-3",
		"1.50e1", "123.456e-2", "123.456e2", "123.456e3", "123.456e4", "-9.99e-1", "5e-1", "12e-1", "120e-1", "0.000123",
		"1e-16383", "1.5e-16382", "1e300", "-1.7976931348623157e308", "4.9e-324", "100000000000000000000000000001",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		n := ""
		if rng.IntN(3) == 0 {
			n = "-"
		}
		if rng.IntN(4) == 0 {
			n += "0"
		} else {
			n += fmt.Sprint(1 + rng.IntN(9))
			for range rng.IntN(6) {
				n += fmt.Sprint(rng.IntN(10))
			}
		}
		if rng.IntN(2) == 0 {
			n += "."
			for range 1 + rng.IntN(6) {
				n += fmt.Sprint(rng.IntN(10))
			}
		}
		if rng.IntN(2) == 0 {
			n += []string{"e", "E"}[rng.IntN(2)] + []string{"", "+", "-"}[rng.IntN(3)] + fmt.Sprint(rng.IntN(40))
		}
		ns = append(ns, n)
	}
	var want []string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT array_agg(n::jsonb::text ORDER BY o) FROM unnest($1::text[]) WITH ORDINALITY AS u(n, o)`, ns).Scan(&want))
	for i, n := range ns {
		got, ok := ctxtype.PgNumeric(n, 1<<16)
		require.True(t, ok, n)
		require.Equal(t, want[i], got, "%s as jsonb", n)
		again, ok := ctxtype.PgNumeric(got, 1<<16)
		require.True(t, ok)
		require.Equal(t, got, again, "%s: the stored form is its own stored form", n)
	}

	// Refused: what jsonb cannot hold, and what the limit cannot.
	for _, n := range []string{"1e-16384", "1e-20000", "1.5e-16383", "0e-16384", "1e200000", "1e99999999999999999999", "-1e-99999999999999999999"} {
		_, ok := ctxtype.PgNumeric(n, 1<<16)
		require.False(t, ok, n)
	}
	for _, n := range []string{"1e-16384", "1e-20000", "1.5e-16383", "0e-16384"} {
		_, err := pool.Exec(t.Context(), `SELECT $1::jsonb`, n)
		require.Error(t, err, "%s: jsonb cannot hold it either", n)
	}
	_, ok := ctxtype.PgNumeric("1e65536", 1<<16)
	require.False(t, ok, "65,537 bytes stored")
	got, ok := ctxtype.PgNumeric("1e65535", 1<<16)
	require.True(t, ok)
	require.Len(t, got, 1<<16)
	_, ok = ctxtype.PgNumeric("1e131071", 1<<16)
	require.False(t, ok, "9 bytes sent, 131,072 stored")
}
