package validation

import (
	"strings"
	"unicode"
)

// credentialWords are the parts of a metadata key that mark it as a
// credential, in item metadata, agent_context and variables alike. KXM refuses such keys so that secrets never reach a prompt.
var credentialWords = setOf("token", "password", "passwd", "secret", "secrets", "permissions", "apikey", "credential", "credentials")

// LooksLikeCredential splits a key into words (on non-alphanumerics and
// camelCase) and reports whether it names a credential: token, api_key,
// password, secret, permissions and their spellings. max_tokens is fine;
// access_token and apiKey are not.
func LooksLikeCredential(key string) bool {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	runes := []rune(key)
	for i, r := range runes {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && i > 0 && unicode.IsLower(runes[i-1]):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	for i, w := range words {
		if credentialWords[w] {
			return true
		}
		if w == "api" && i+1 < len(words) && words[i+1] == "key" {
			return true
		}
	}
	return false
}

func setOf(vals ...string) map[string]bool {
	m := make(map[string]bool, len(vals))
	for _, v := range vals {
		m[v] = true
	}
	return m
}
