package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRootRedirectsToTheExplorer: a browser opening the server's address
// is sent to the explorer (302 Found to /ui, for GET and HEAD), and,
// following it, reaches the sign-in page; the root needs no key and
// reveals nothing else.
func TestRootRedirectsToTheExplorer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, err := http.NewRequest(method, e.url+"/", nil)
		require.NoError(t, err)
		res, err := noFollow.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusFound, res.StatusCode, method)
		require.Equal(t, "/ui", res.Header.Get("Location"), method)
	}
	res, err := http.Get(e.url + "/")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.True(t, strings.HasPrefix(res.Request.URL.Path, "/ui/login"), res.Request.URL.String())
	require.Equal(t, 404, e.do("GET", "/nothing-here", "", nil).status, "only the root redirects")
}
