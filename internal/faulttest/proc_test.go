package faulttest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/pgtest"
)

// auditKey is the deployment's audit key for the servers these tests run,
// so checkpoints are signed and idempotency answers carry their HMAC as in
// production.
const auditKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// built is the contextd binary, built once per test process into a
// directory removed when the tests end.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
	took time.Duration
}

func TestMain(m *testing.M) {
	pgtest.Main(m)
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// binary returns the path of the contextd binary, building it on first use.
// It is built without -race: the server's own races are the unit tests'
// business, and an uninstrumented binary keeps the crash cycles fast.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		start := time.Now()
		built.dir, built.err = os.MkdirTemp("", "contextd-faulttest-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "contextd")
		cmd := exec.Command("go", "build", "-o", built.path, "github.com/contextd/contextd/cmd/contextd")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = &buildError{err: err, out: string(out)}
		}
		built.took = time.Since(start)
		t.Logf("contextd binary built in %v", built.took.Round(time.Millisecond))
	})
	if built.err != nil {
		t.Fatalf("build contextd: %v", built.err)
	}
	return built.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// proc is one `contextd serve` process.
type proc struct {
	cmd    *exec.Cmd
	url    string // http://host:port
	key    string // the first admin's key, printed only by the first start on an empty database
	stderr *tail
	done   chan struct{} // closed once the process has exited
	err    error         // Wait's answer, set before done is closed
	kill1  sync.Once
}

// startProc starts `contextd serve` on dbURL, listening on a port the kernel
// picks, and returns once it prints the address it listens on.
func startProc(t *testing.T, dbURL string, args ...string) *proc {
	t.Helper()
	argv := append([]string{"serve", "--database-url", dbURL, "--listen", "127.0.0.1:0"}, args...)
	cmd := exec.Command(binary(t), argv...)
	cmd.Env = append(os.Environ(), "CONTEXTD_AUDIT_KEY="+auditKey, "CONTEXTD_LOG_LEVEL=warn")
	out := &stdoutWatch{listening: make(chan string, 1)}
	p := &proc{cmd: cmd, stderr: &tail{max: 256 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start contextd: %v", err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	select {
	case addr := <-out.listening:
		p.url = "http://" + addr
		p.key = out.adminKey()
	case <-p.done:
		t.Fatalf("contextd exited before listening: %v\n%s", p.err, p.stderr)
	case <-time.After(30 * time.Second):
		p.kill()
		t.Fatalf("contextd did not listen within 30s\n%s", p.stderr)
	}
	return p
}

// kill sends SIGKILL (once) and waits for the process to be gone.
func (p *proc) kill() {
	p.kill1.Do(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
		}
	})
	<-p.done
}

// stdoutWatch reads the server's stdout for the two lines tests need: the
// admin key (shown once, indented, on a line of its own) and the address.
type stdoutWatch struct {
	mu        sync.Mutex
	partial   []byte
	key       string
	listening chan string
}

const listeningPrefix = "contextd listening on http://"

func (w *stdoutWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := strings.TrimSpace(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
		switch {
		case strings.HasPrefix(line, "ctxd_") && !strings.ContainsRune(line, ' '):
			w.key = line
		case strings.HasPrefix(line, listeningPrefix):
			select {
			case w.listening <- strings.TrimPrefix(line, listeningPrefix):
			default:
			}
		}
	}
}

func (w *stdoutWatch) adminKey() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.key
}

// tail keeps the last max bytes written to it: the server's log, shown
// when a test fails.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (l *tail) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	if over := len(l.buf) - l.max; over > 0 {
		l.buf = append([]byte(nil), l.buf[over:]...)
	}
	return len(b), nil
}

func (l *tail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// errorLines returns the lines of the log at level ERROR, and any panic.
func (l *tail) errorLines() []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
			out = append(out, line)
		}
	}
	return out
}
