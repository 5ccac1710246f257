package mcp

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Origins are the browser origins allowed to call the MCP endpoint
// (--mcp-allowed-origins); the zero value allows none. The streamable-HTTP
// transport requires a server to validate Origin against DNS rebinding: a
// foreign page whose name is re-pointed at contextd's address is
// same-origin with it as far as the browser can tell (Host is the
// attacker's name too), so comparing Origin with Host proves nothing and
// only a list of the origins of known clients tells them apart. A request
// without Origin is not a browser's (an MCP host, curl) and is allowed.
type Origins struct{ allowed []string }

// ParseOrigins checks that each entry is an origin as a browser sends it,
// scheme://host[:port] and nothing more, so that a path, a trailing slash
// or a wildcard is refused at start instead of silently matching nothing.
// Space around an entry ("a, b") and empty entries are ignored.
func ParseOrigins(list []string) (Origins, error) {
	var o Origins
	for _, s := range list {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		origin, err := parseOrigin(s)
		if err != nil {
			return Origins{}, err
		}
		o.allowed = append(o.allowed, origin)
	}
	return o, nil
}

// parseOrigin is s as an origin as browsers serialise it: scheme and host
// in lower case, a default port left out.
func parseOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%q is not an origin (scheme://host[:port]): %v", s, err)
	}
	host := strings.ToLower(u.Host)
	if u.Scheme == "" || u.Host == "" || u.User != nil || !strings.EqualFold(s, u.Scheme+"://"+host) ||
		strings.HasSuffix(host, ":") || strings.Contains(host, "*") {
		return "", fmt.Errorf("%q is not an origin: give scheme://host[:port], without path, query, user or wildcard (e.g. https://app.example.com)", s)
	}
	if port := u.Port(); u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80" {
		host = strings.TrimSuffix(host, ":"+port)
	}
	return u.Scheme + "://" + host, nil
}

// Allows reports whether r may reach the endpoint: it carries no Origin,
// or exactly one that is listed. An empty or repeated Origin is refused:
// only a browser sends one, and which would count is not for the server
// to guess.
func (o Origins) Allows(r *http.Request) bool {
	vals, sent := r.Header["Origin"]
	if !sent {
		return true
	}
	return len(vals) == 1 && slices.Contains(o.allowed, strings.ToLower(vals[0]))
}
