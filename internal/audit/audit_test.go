package audit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCanonicalJSONIsTheValueNotTheText(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{`{"b":1,"a":[true,null]}`, `{ "a" : [ true , null ], "b" : 1 }`},
		{`{"n":1.50}`, `{"n":15e-1}`},
		{`{"n":100}`, `{"n":1E2}`},
		{`{"n":0}`, `{"n":-0.000}`},
		{`{"s":"a<b&c"}`, `{"s":"a\u003cb\u0026c"}`},
		{`{"s":"ü\n"}`, `{"s":"\u00fc\u000a"}`},
	} {
		a, err := CanonicalJSON([]byte(tc.a))
		require.NoError(t, err)
		b, err := CanonicalJSON([]byte(tc.b))
		require.NoError(t, err)
		require.Equal(t, string(a), string(b), "%s vs %s", tc.a, tc.b)
	}
	for _, tc := range []struct{ a, b string }{
		{`{"n":1.5}`, `{"n":1.51}`},
		{`{"n":10}`, `{"n":1}`},
		{`{"a":1}`, `{"A":1}`},
		{`["a","b"]`, `["b","a"]`},
		{`{"n":"1"}`, `{"n":1}`},
	} {
		a, _ := CanonicalJSON([]byte(tc.a))
		b, _ := CanonicalJSON([]byte(tc.b))
		require.NotEqual(t, string(a), string(b), "%s vs %s", tc.a, tc.b)
	}
	got, err := CanonicalJSON([]byte(`{"z":{"y":[1.0,-2.50e3]},"a":"\"q\""}`))
	require.NoError(t, err)
	require.Equal(t, `{"a":"\"q\"","z":{"y":[1,-25e2]}}`, string(got))
	_, err = CanonicalJSON([]byte(`{"a":1} {"b":2}`))
	require.Error(t, err)
}

func TestItemVersionBodyTruncatesTimesAsTheDatabaseDoes(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	r := ItemVersionRow{Project: "p", Key: "k", Version: 1, Trigger: []byte(`{}`), Metadata: []byte(`{}`), Provenance: []byte(`{}`),
		ValidFrom: &at, CreatedAt: at}
	b, err := ItemVersionBody(r)
	require.NoError(t, err)
	require.Contains(t, string(b), `"valid_from":"2026-01-02T02:04:05.123456Z"`)
	require.Contains(t, string(b), `"valid_until":null`)
	stored := at.Truncate(time.Microsecond).UTC()
	r.ValidFrom, r.CreatedAt = &stored, stored
	b2, err := ItemVersionBody(r)
	require.NoError(t, err)
	require.Equal(t, string(b), string(b2))
	r.Content = "changed"
	b3, err := ItemVersionBody(r)
	require.NoError(t, err)
	require.NotEqual(t, string(b), string(b3))
}

func TestVerifierLinksEntries(t *testing.T) {
	v := NewVerifier()
	prev := Genesis
	for i, body := range []string{`{"key":"a","version":1}`, `{"key":"a","version":2}`} {
		eh := Hash([]byte(body))
		ch := Link(prev, eh)
		subject := ItemVersionSubject("a", i+1)
		require.True(t, v.Entry(Entry{Seq: int64(i + 1), Kind: KindItemVersion, Subject: subject, Body: []byte(body), EntryHash: eh, ChainHash: ch}, []byte(body)))
		prev = ch
	}
	require.True(t, v.AtHead(2, prev))
	require.True(t, v.ItemState("a", 2, true))
	require.False(t, v.ItemState("a", 2, false))
	require.Equal(t, StateMismatch, v.Problem().Code)
	require.Equal(t, int64(2), v.Problem().Seq)
}
