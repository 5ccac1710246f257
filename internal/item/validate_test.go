package item

import (
	"testing"

	"github.com/stretchr/testify/require"

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
