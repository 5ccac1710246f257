package item

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/validation"
)

func TestLooksLikeCredential(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{
		"token": true, "api_key": true, "apiKey": true, "API-KEY": true, "apikey": true,
		"password": true, "db_password": true, "secret": true, "clientSecret": true,
		"permissions": true, "access_token": true, "refreshToken": true, "credentials": true,
		"max_tokens": false, "ticket": false, "keyboard": false, "author": false,
		"tokenizer": false, "secretary": false, "key": false, "api": false,
	} {
		require.Equal(t, want, validation.LooksLikeCredential(key), key)
	}
}

// TestTriggerMatch: keywords match whole words unless the trigger says
// "match": "stem"; "word" is the default spelt out (stored as the default,
// so the two writes are the same fields); anything else, or a match on
// another trigger, is a field error at /trigger/match.
func TestTriggerMatch(t *testing.T) {
	t.Parallel()
	field := func(body string) (ctxtype.Fields, *validation.Field) {
		_, f, err := normalized([]byte(body))
		if err == nil {
			return f, nil
		}
		var verr *validation.Error
		require.ErrorAs(t, err, &verr)
		require.Len(t, verr.Fields, 1, "%v", err)
		return f, &verr.Fields[0]
	}
	f, bad := field(`{"key":"k","content":"x","trigger":{"keywords":["chargeback"],"match":"stem"}}`)
	require.Nil(t, bad)
	require.Equal(t, "stem", f.Trigger.Match)
	require.True(t, f.Trigger.Stem())
	def, bad := field(`{"key":"k","content":"x","trigger":{"keywords":["chargeback"]}}`)
	require.Nil(t, bad)
	word, bad := field(`{"key":"k","content":"x","trigger":{"keywords":["chargeback"],"match":"word"}}`)
	require.Nil(t, bad)
	require.Equal(t, def, word, "word is the default")
	require.Empty(t, word.Trigger.Match)
	_, bad = field(`{"key":"k","content":"x","trigger":{"keywords":["chargeback"],"match":"fuzzy"}}`)
	require.Equal(t, &validation.Field{Pointer: "/trigger/match", Code: "enum", Detail: `match must be one of word, stem, not "fuzzy"`}, bad)
	_, bad = field(`{"key":"k","content":"x","trigger":{"always":true,"match":"stem"}}`)
	require.Equal(t, "/trigger/match", bad.Pointer)
	require.Equal(t, "invalid", bad.Code)
}

// A refused value is quoted in its problem's detail, cut short: a 100 KB
// kind is not echoed back whole.
func TestRefusedValuesAreQuotedShort(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 100_000)
	_, _, err := normalized([]byte(`{"key":"k","content":"x","kind":"` + long + `","source":"` + long + `"}`))
	var verr *validation.Error
	require.ErrorAs(t, err, &verr)
	require.Len(t, verr.Fields, 2)
	for _, f := range verr.Fields {
		require.Less(t, len(f.Detail), 400, f.Pointer)
		require.Contains(t, f.Detail, `"`+strings.Repeat("é", 64)+`" (100000 characters in all)`, f.Pointer)
	}
	_, _, err = normalized([]byte(`{"key":"k","content":"x","kind":"nope"}`))
	require.ErrorAs(t, err, &verr)
	require.Contains(t, verr.Fields[0].Detail, `not "nope"`, "a short value is quoted whole")
}
