package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

func TestMain(m *testing.M) {
	// The client commands read the environment and the user's client
	// config: the tests name what they use, and nothing else counts.
	for _, k := range []string{"CONTEXTD_URL", "CONTEXTD_KEY", "CONTEXTD_PROJECT", "CONTEXTD_CLIENT_CONFIG"} {
		os.Unsetenv(k)
	}
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(os.TempDir(), "contextd-cli-test-no-config"))
	pgtest.Main(m)
}

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Execute(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestMigrateUpDownStatus(t *testing.T) {
	t.Parallel()
	url := pgtest.Empty(t)
	out, errs, code := run(t, "migrate", "status", "--database-url", url)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "pending")
	_, errs, code = run(t, "migrate", "up", "--database-url", url)
	require.Equal(t, 0, code, errs)
	out, _, _ = run(t, "migrate", "status", "--database-url", url)
	require.Contains(t, out, "applied")
	require.NotContains(t, out, "pending")
	_, errs, code = run(t, "migrate", "down", "--database-url", url)
	require.Equal(t, 0, code, errs)
	out, _, _ = run(t, "migrate", "status", "--database-url", url)
	require.Contains(t, out, "pending")
	_, errs, code = run(t, "migrate", "up", "--database-url", url)
	require.Equal(t, 0, code, errs)
}

func TestAgentsCreateJSON(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	out, errs, code := run(t, "agents", "create", "--database-url", url, "--name", "crit", "--role", "critic",
		"--permission", "edit", "--projects", "acme, globex", "--json")
	require.Equal(t, 0, code, errs)
	var a struct {
		ID, Name, Role, Permission, Key string
		Projects                        []string
		MaxAuthority                    string `json:"max_authority"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &a), out)
	require.Equal(t, "instruction", a.MaxAuthority, "an edit agent's default")
	require.True(t, strings.HasPrefix(a.ID, "agt_"))
	require.True(t, strings.HasPrefix(a.Key, "ctxd_"))
	require.Equal(t, []string{"acme", "globex"}, a.Projects)
	require.Equal(t, "critic", a.Role)
	require.Equal(t, "edit", a.Permission)

	_, errs, code = run(t, "agents", "create", "--database-url", url, "--name", "x", "--role", "r", "--permission", "root", "--projects", "a")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "permission")

	out, errs, code = run(t, "agents", "create", "--database-url", url, "--name", "host", "--role", "host",
		"--permission", "edit", "--projects", "acme", "--max-authority", "policy", "--json")
	require.Equal(t, 0, code, errs)
	require.NoError(t, json.Unmarshal([]byte(out), &a), out)
	require.Equal(t, "policy", a.MaxAuthority)
	_, errs, code = run(t, "agents", "create", "--database-url", url, "--name", "x", "--role", "r", "--permission", "edit", "--projects", "a", "--max-authority", "gospel")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "max_authority")
}

// serve starts `contextd serve` in-process and returns its base URL, its
// stdout so far, and a stop function that waits for it to exit.
func serve(t *testing.T, args ...string) (string, *syncBuffer, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	errb := &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- Execute(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), out, errb) }()
	re := regexp.MustCompile(`listening on (http://\S+)`)
	deadline := time.Now().Add(90 * time.Second)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			stopped := false
			var code int
			return m[1], out, func() int {
				if !stopped {
					cancel()
					code = <-done
					stopped = true
				}
				return code
			}
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve exited with %d:\n%s\n%s", code, out.String(), errb.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not start:\n%s\n%s", out.String(), errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func get(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

var keyRE = regexp.MustCompile(`ctxd_[0-9A-Za-z]+`)

func TestServeMigratesAndBootstrapsOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.Empty(t)
	// A stale schema with --migrate=false refuses to start.
	_, errs, code := run(t, "serve", "--database-url", url, "--migrate=false", "--listen", "127.0.0.1:0")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "not current")

	base, out, stop := serve(t, "--database-url", url)
	key := keyRE.FindString(out.String())
	require.NotEmpty(t, key, out.String())
	status, _ := get(t, base+"/readyz", "")
	require.Equal(t, 200, status)
	status, body := get(t, base+"/v1/projects", key)
	require.Equal(t, 200, status, body)
	require.Contains(t, body, "_shared")
	require.Equal(t, 0, stop())

	// The second start finds an admin and prints no key; --migrate=false is fine now.
	base, out, stop = serve(t, "--database-url", url, "--migrate=false")
	require.Empty(t, keyRE.FindString(out.String()))
	status, _ = get(t, base+"/v1/projects", key)
	require.Equal(t, 200, status)
	require.Equal(t, 0, stop())
}

// embeddedDataDir is a data directory for an embedded cluster. As root the
// cluster runs as the postgres user, who must reach it; t.TempDir makes its
// directories 0700.
func embeddedDataDir(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	require.NoError(t, os.Chmod(tmp, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	return filepath.Join(tmp, "data")
}

// TestServeEmbeddedDefault is `make run` on a machine with only
// PostgreSQL's binaries: no DATABASE_URL, a data directory of its own.
func TestServeEmbeddedDefault(t *testing.T) {
	t.Parallel()
	dir := embeddedDataDir(t)
	base, out, stop := serve(t, "--database-url", "", "--data-dir", dir)
	key := keyRE.FindString(out.String())
	require.NotEmpty(t, key, out.String())
	require.Less(t, strings.Index(out.String(), "listening on"), strings.Index(out.String(), key), "the key is shown once the server listens")
	keyFile := filepath.Join(dir, "admin.key")
	st, err := os.Stat(keyFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	require.Equal(t, key, strings.TrimSpace(string(b)))
	// The embedded default keeps the deployment's audit key next to it.
	ak, err := os.Stat(filepath.Join(dir, "audit.key"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), ak.Mode().Perm())
	require.Contains(t, out.String(), "Created the audit key")
	status, body := get(t, base+"/v1/projects/_shared/audit/checkpoint", key)
	require.Equal(t, 200, status, body)
	status, body = get(t, base+"/v1/projects", key)
	require.Equal(t, 200, status, body)
	require.Equal(t, 0, stop())
	pid := filepath.Join(dir, "pgdata", "postmaster.pid")
	_, err = os.Stat(pid)
	require.True(t, os.IsNotExist(err), "the cluster is stopped with the server")

	// Reused on the next start: same data, same key, no new admin.
	base, out, stop = serve(t, "--database-url", "", "--data-dir", dir)
	require.Empty(t, keyRE.FindString(out.String()))
	require.NotContains(t, out.String(), "Created the audit key", "the audit key is made once")
	status, _ = get(t, base+"/v1/projects", key)
	require.Equal(t, 200, status)
	require.Equal(t, 0, stop())
}

func send(t *testing.T, method, url, key, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	require.Less(t, res.StatusCode, 300, string(b))
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func TestWhyAndPacketShow(t *testing.T) {
	t.Parallel()
	base, out, stop := serve(t, "--database-url", pgtest.NewURL(t))
	defer stop()
	key := keyRE.FindString(out.String())
	send(t, "PUT", base+"/v1/projects/acme", key, `{}`)
	send(t, "PUT", base+"/v1/projects/acme/items/refund.rules", key, `{"content":"Refunds over 500 EUR need a manager.","trigger":{"keywords":["refund"]}}`)
	send(t, "PUT", base+"/v1/projects/acme/items/deploy", key, `{"content":"Deploys freeze on Fridays.","trigger":{"keywords":["deploy"]}}`)
	send(t, "PUT", base+"/v1/projects/acme/items/greeting", key, `{"content":"Hello {{customer}}.","template":true}`)
	p := send(t, "POST", base+"/v1/projects/acme/packets", key,
		`{"target_role":"implementer","history":[{"role":"user","author":"person","content":"my refund failed"}]}`)
	id := p["packet_id"].(string)

	stdout, errs, code := run(t, "why", id, "refund.rules", "--url", base, "--key", key)
	require.Equal(t, 0, code, errs)
	require.Contains(t, stdout, "item refund.rules v1: INCLUDED in Project Knowledge")
	require.Contains(t, stdout, `rule:    keyword:"refund"@history[0]`)
	require.Contains(t, stdout, "project acme")

	stdout, errs, code = run(t, "why", id, "deploy", "--url", base, "--key", key, "--project", "acme")
	require.Equal(t, 0, code, errs)
	require.Contains(t, stdout, "NOT A CANDIDATE (not_triggered)")

	stdout, errs, code = run(t, "packet", "show", id, "--url", base, "--key", key)
	require.Equal(t, 0, code, errs)
	require.Contains(t, stdout, "packet    "+id)
	require.Contains(t, stdout, "item:refund.rules v1")
	require.Contains(t, stdout, "---- rendered ----\n# Context Packet\n")
	require.Contains(t, stdout, "excluded items:\n  greeting")
	require.Contains(t, stdout, "template_unresolved")

	stdout, errs, code = run(t, "why", id, "refund.rules", "--layer", "shared", "--url", base, "--key", key)
	require.Equal(t, 0, code, errs)
	require.Contains(t, stdout, "NOT A CANDIDATE (did_not_exist)", "no _shared item of that key")

	_, errs, code = run(t, "packet", "show", "ctxpkt_missing", "--url", base, "--key", key)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "not found")
	_, errs, code = run(t, "why", id, "x", "--url", base)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "CONTEXTD_KEY")
}

func TestHandoffsHistory(t *testing.T) {
	t.Parallel()
	base, out, stop := serve(t, "--database-url", pgtest.NewURL(t))
	defer stop()
	key := keyRE.FindString(out.String())
	send(t, "PUT", base+"/v1/projects/acme", key, `{}`)
	h := send(t, "POST", base+"/v1/projects/acme/handoffs", key,
		`{"task_id":"T-1","intent":"request_review","source":{"role":"implementer"},"target":{"role":"critic"},"summary":"patch"}`)
	id := h["id"].(string)
	send(t, "POST", base+"/v1/projects/acme/handoffs/"+id+"/reject", key, `{"reason":"no tests"}`)
	send(t, "POST", base+"/v1/projects/acme/packets", key, `{"target_role":"critic","task":{"task_id":"T-1","step_id":"review"}}`)

	stdout, errs, code := run(t, "handoffs", "history", "--project", "acme", "T-1", "--url", base, "--key", key)
	require.Equal(t, 0, code, errs)
	require.Contains(t, stdout, "task T-1 in acme: 3 entries")
	require.Regexp(t, `created +`+id+`  implementer → critic  \[· → pending\]`, stdout)
	require.Regexp(t, `rejected +`+id+`  implementer → critic  \[pending → rejected\].*reason: no tests`, stdout)
	require.Contains(t, stdout, "step review")
	_, errs, code = run(t, "handoffs", "history", "T-1", "--url", base, "--key", key)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "--project")
}

// TestSecondServeOnOneDataDirRefuses: a second server on the same embedded
// cluster must not take the first one's database down with it.
func TestSecondServeOnOneDataDirRefuses(t *testing.T) {
	t.Parallel()
	dir := embeddedDataDir(t)
	base, out, stop := serve(t, "--database-url", "", "--data-dir", dir)
	defer stop()
	key := keyRE.FindString(out.String())
	_, errs, code := run(t, "serve", "--database-url", "", "--data-dir", dir, "--listen", "127.0.0.1:0")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "another contextd serve is running")
	status, _ := get(t, base+"/readyz", "")
	require.Equal(t, 200, status, "the first server's database is still up")
	status, _ = get(t, base+"/v1/projects", key)
	require.Equal(t, 200, status)
}

// TestShutdownEndsEventStreams: a graceful stop does not hang on an open
// live inbox.
func TestShutdownEndsEventStreams(t *testing.T) {
	t.Parallel()
	base, out, stop := serve(t, "--database-url", pgtest.NewURL(t))
	key := keyRE.FindString(out.String())
	send(t, "PUT", base+"/v1/projects/acme", key, `{}`)
	req, err := http.NewRequest("GET", base+"/v1/projects/acme/handoffs/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	start := time.Now()
	require.Equal(t, 0, stop())
	require.Less(t, time.Since(start), 10*time.Second)
}

// TestClientReadsTheEmbeddedAdminKey: without --key or CONTEXTD_KEY, the
// command line uses the admin key the embedded default keeps in its data
// directory; an explicit key wins.
func TestClientReadsTheEmbeddedAdminKey(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CONTEXTD_DATA_DIR", dir)
	_, err := (&clientFlags{}).client()
	require.ErrorContains(t, err, "no API key")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "admin.key"), []byte("ctxd_fromfile\n"), 0o600))
	c, err := (&clientFlags{}).client()
	require.NoError(t, err)
	require.Equal(t, "ctxd_fromfile", c.key)
	c, err = (&clientFlags{key: "ctxd_given"}).client()
	require.NoError(t, err)
	require.Equal(t, "ctxd_given", c.key)
}
