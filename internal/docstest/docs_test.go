//go:build docstest

package docstest

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// blockTimeout bounds one block: the longest a page asks a reader to wait.
const blockTimeout = 2 * time.Minute

// TestDocs runs the runnable blocks of every page, each page in a bash
// session of its own against a server of its own on a fresh database, as a
// reader who has done the Quickstart's setup (contextd on PATH,
// CONTEXTD_URL and CONTEXTD_KEY exported) would run them.
func TestDocs(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	pages, err := Pages(root)
	require.NoError(t, err)
	bin := buildContextd(t, root)
	for _, page := range pages {
		src, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err)
		blocks, err := Parse(page, string(src))
		require.NoError(t, err)
		if len(blocks) == 0 {
			continue
		}
		t.Run(page, func(t *testing.T) {
			t.Parallel()
			runPage(t, bin, blocks)
		})
	}
}

// runPage runs one page's blocks in order and fails at the first block
// that fails or prints other than the page shows.
func runPage(t *testing.T, bin string, blocks []Block) {
	srv := startServer(t, bin)
	home, work, scripts := t.TempDir(), t.TempDir(), t.TempDir()
	env := []string{
		"PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home,
		"LANG=C.UTF-8",
		"TERM=dumb",
		"CONTEXTD_URL=" + srv.url,
		"CONTEXTD_KEY=" + srv.key,
	}
	s, err := StartSession(work, scripts, env)
	require.NoError(t, err)
	defer s.Close()
	for _, b := range blocks {
		out, err := s.Run(b.Code, blockTimeout)
		if err != nil {
			t.Fatalf("%s: the block failed: %v\n--- the block ---\n%s--- its output ---\n%s--- the server's log (its end) ---\n%s",
				b.Where(), err, b.Code, out, srv.logTail())
		}
		if b.HasOutput && !Match(b.Output, out) {
			diff := FirstDifference(b.Output, out)
			if diff != "" {
				diff = " (" + diff + ")"
			}
			t.Fatalf("%s: the block's output is not what %s:%d shows%s\n--- the page shows ---\n%s--- the block printed ---\n%s",
				b.Where(), b.File, b.OutputLine, diff, b.Output, out)
		}
	}
}

// buildContextd builds bin/contextd into a directory of its own, which the
// sessions put first on PATH.
func buildContextd(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin", "contextd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/contextd")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// server is one `contextd serve` on a fresh database.
type server struct {
	url, key string
	log      string // the file its output goes to
}

var (
	listeningLine = regexp.MustCompile(`^contextd listening on (http://\S+)$`)
	keyLine       = regexp.MustCompile(`^\s+(ctxd_\S+)$`)
)

// startServer starts `contextd serve` as a reader's `make run` does, on an
// empty database it migrates itself, with an audit key, on a free port, and
// reads the address and the first admin's key from what it prints.
func startServer(t *testing.T, bin string) *server {
	t.Helper()
	dbURL := pgtest.Empty(t)
	seed := make([]byte, 32)
	_, err := rand.Read(seed)
	require.NoError(t, err)
	srv := &server{log: filepath.Join(t.TempDir(), "server.log")}
	logf, err := os.Create(srv.log)
	require.NoError(t, err)
	cmd := exec.Command(bin, "serve", "--database-url", dbURL, "--listen", "127.0.0.1:0")
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "CONTEXTD_AUDIT_KEY=" + base64.StdEncoding.EncodeToString(seed)}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := listeningLine.FindStringSubmatch(line); m != nil {
				srv.url = m[1]
			} else if m := keyLine.FindStringSubmatch(line); m != nil && srv.url != "" && srv.key == "" {
				srv.key = m[1]
				ready <- nil
			}
		}
		select {
		case ready <- fmt.Errorf("contextd serve ended before it printed its address and the admin key"):
		default: // it did print them
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-ready:
		require.NoError(t, err, "server log:\n%s", srv.logTail())
	case <-time.After(2 * time.Minute):
		t.Fatalf("contextd serve did not print its address and key within 2 minutes; its log:\n%s", srv.logTail())
	}
	return srv
}

// logTail is the end of the server's log, for a failure's message.
func (s *server) logTail() string {
	b, _ := os.ReadFile(s.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n") + "\n"
}
