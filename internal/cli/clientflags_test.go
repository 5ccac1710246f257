package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestClientSettingsPrecedence: every client command is told where and
// who the same way, each setting from the first that gives it: the flag,
// the environment, the client config, the default. The config's key goes
// only to the config's server, and a key that others may read is refused.
func TestClientSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CONTEXTD_DATA_DIR", filepath.Join(dir, "nodata"))
	t.Setenv("XDG_CONFIG_HOME", dir)
	resolved := func(f clientFlags) clientFlags {
		t.Helper()
		require.NoError(t, f.resolve())
		return f
	}

	// Nothing given: the local server, no project, no key.
	f := resolved(clientFlags{})
	require.Equal(t, defaultURL, f.url)
	require.Empty(t, f.project)
	require.Empty(t, f.key)

	// The default file ($XDG_CONFIG_HOME/contextd/client.toml).
	cfgDir := filepath.Join(dir, "contextd")
	require.NoError(t, os.MkdirAll(cfgDir, 0o700))
	cfg := filepath.Join(cfgDir, "client.toml")
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "key"), []byte("ctxd_fromkeyfile\n"), 0o600))
	require.NoError(t, os.WriteFile(cfg, []byte("url = \"http://cfg.example:8080/\"\nkey_file = \"key\"\nproject = \"acme\"\n"), 0o600))
	f = resolved(clientFlags{})
	require.Equal(t, "http://cfg.example:8080/", f.url)
	require.Equal(t, "acme", f.project)
	require.Equal(t, "ctxd_fromkeyfile", f.key, "key_file is read relative to the config")
	named, err := (&clientFlags{}).named()
	require.NoError(t, err)
	require.True(t, named, "a config's url names a server")

	// The environment wins over the file; the file's key is not sent to
	// another server.
	t.Setenv("CONTEXTD_URL", "http://env.example")
	t.Setenv("CONTEXTD_PROJECT", "globex")
	f = resolved(clientFlags{})
	require.Equal(t, "http://env.example", f.url)
	require.Equal(t, "globex", f.project)
	require.Empty(t, f.key, "the config's key is for the config's url only")
	t.Setenv("CONTEXTD_URL", "http://cfg.example:8080")
	require.Equal(t, "ctxd_fromkeyfile", resolved(clientFlags{}).key, "the same server, with or without a trailing slash")
	t.Setenv("CONTEXTD_KEY", "ctxd_fromenv")
	require.Equal(t, "ctxd_fromenv", resolved(clientFlags{}).key)

	// The flags win over everything.
	f = resolved(clientFlags{url: "http://flag.example", key: "ctxd_flag", project: "initech"})
	require.Equal(t, "http://flag.example", f.url)
	require.Equal(t, "ctxd_flag", f.key)
	require.Equal(t, "initech", f.project)

	// --client-config names another file, which must exist.
	other := filepath.Join(dir, "other.toml")
	require.NoError(t, os.WriteFile(other, []byte("url = \"http://other.example\"\nkey = \"ctxd_inline\"\n"), 0o600))
	t.Setenv("CONTEXTD_URL", "")
	t.Setenv("CONTEXTD_KEY", "")
	f = resolved(clientFlags{config: other})
	require.Equal(t, "http://other.example", f.url)
	require.Equal(t, "ctxd_inline", f.key)
	t.Setenv("CONTEXTD_CLIENT_CONFIG", other)
	require.Equal(t, "ctxd_inline", resolved(clientFlags{}).key, "CONTEXTD_CLIENT_CONFIG names it too")
	require.ErrorContains(t, (&clientFlags{config: filepath.Join(dir, "missing.toml")}).resolve(), "missing.toml")

	// A key others may read is refused, as ssh refuses such a private key.
	require.NoError(t, os.Chmod(other, 0o644))
	err = (&clientFlags{config: other}).resolve()
	require.ErrorContains(t, err, "chmod 600")
	require.NoError(t, os.Chmod(filepath.Join(cfgDir, "key"), 0o640))
	err = (&clientFlags{config: cfg}).resolve()
	require.ErrorContains(t, err, "others may read it")

	// A member it does not know is an error, not a silent default.
	bad := filepath.Join(dir, "bad.toml")
	require.NoError(t, os.WriteFile(bad, []byte("server = \"http://x\"\n"), 0o600))
	require.ErrorContains(t, (&clientFlags{config: bad}).resolve(), "url, key, key_file and project")
	_, errs, code := run(t, "projects", "list", "--client-config", bad)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "bad.toml")
}

// TestEveryClientCommandHasAnExample walks the command tree: the help of
// every command of the daily jobs shows how it is called.
func TestEveryClientCommandHasAnExample(t *testing.T) {
	t.Parallel()
	// bench is a load generator with its own help, not a daily job.
	exempt := map[string]bool{"contextd help": true, "contextd completion": true, "contextd bench": true}
	var missing []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if exempt[c.CommandPath()] {
			return
		}
		if c.Runnable() && strings.TrimSpace(c.Example) == "" {
			missing = append(missing, c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	var out bytes.Buffer
	root := newRoot(&out, &out)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	walk(root)
	require.Empty(t, missing, "commands without an Example")

	// And --help shows it.
	stdout, _, code := run(t, "packets", "assemble", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "Examples:\n  contextd packets assemble --project acme --role implementer")
}

// The embedded default's .contextd/admin.key is the key of a server on this
// machine: it is sent to a loopback URL and never to another host, however
// the URL was named.
func TestEmbeddedAdminKeyStaysOnThisMachine(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	require.NoError(t, os.MkdirAll(data, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(data, "admin.key"), []byte("ctxd_embedded\n"), 0o600))
	t.Setenv("CONTEXTD_DATA_DIR", data)
	t.Setenv("XDG_CONFIG_HOME", dir)
	for _, u := range []string{"", "http://127.0.0.1:18080", "http://localhost:9", "http://[::1]:8080"} {
		f := clientFlags{url: u}
		require.NoError(t, f.resolve())
		require.Equal(t, "ctxd_embedded", f.key, "url %q", u)
	}
	for _, u := range []string{"http://example.com", "http://10.0.0.7:8080", "http://127.0.0.1.example.com", "http://127.0.0.1:1@evil.example"} {
		f := clientFlags{url: u}
		require.NoError(t, f.resolve())
		require.Empty(t, f.key, "url %q", u)
		t.Setenv("CONTEXTD_URL", u)
		f = clientFlags{}
		require.NoError(t, f.resolve())
		require.Empty(t, f.key, "CONTEXTD_URL %q", u)
		t.Setenv("CONTEXTD_URL", "")
	}
}
