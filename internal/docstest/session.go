package docstest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// sentinel is what the session prints, on its own output, after a block
// ran to its end; the blocks' own output goes to files.
const sentinel = "\x1fdocstest-done"

// Session is one bash process that runs a page's blocks in order, so a
// variable, a function or a directory change of one block holds in the
// next, as in the terminal of a reader who pastes them one by one. It runs
// with errexit and pipefail: the first command that fails ends the session
// and fails its block.
type Session struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string
	scripts string // where the blocks and their outputs are written
	n       int
	exited  chan struct{}
	waitErr error
}

// StartSession starts bash in dir with exactly env as its environment.
// scripts is a directory outside dir for the blocks' files.
func StartSession(dir, scripts string, env []string) (*Session, error) {
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Close ends what the blocks left running too
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := os.Create(filepath.Join(scripts, "session.err"))
	if err != nil {
		return nil, err
	}
	defer stderr.Close() // the child has its own copy
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start bash: %w", err)
	}
	s := &Session{cmd: cmd, stdin: stdin, lines: make(chan string, 16), scripts: scripts, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if _, err := io.WriteString(stdin, "set -eo pipefail\n"); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Run runs one block and returns what it printed (standard output and
// standard error as one stream). The error says how the block failed: a
// command's exit status, or a block still running after timeout.
func (s *Session) Run(code string, timeout time.Duration) (string, error) {
	s.n++
	script := filepath.Join(s.scripts, fmt.Sprintf("block-%d.sh", s.n))
	out := filepath.Join(s.scripts, fmt.Sprintf("block-%d.out", s.n))
	if err := os.WriteFile(script, []byte(code), 0o600); err != nil {
		return "", err
	}
	cmd := fmt.Sprintf("source %s >%s 2>&1 </dev/null\nprintf '\\037docstest-done %%d\\n' %d\n", quote(script), quote(out), s.n)
	if _, err := io.WriteString(s.stdin, cmd); err != nil {
		return s.output(out), fmt.Errorf("the session has ended: %w", err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	want := fmt.Sprintf("%s %d", sentinel, s.n)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				<-s.exited
				return s.output(out), s.failure()
			}
			if line == want {
				return s.output(out), nil
			}
		case <-timer.C:
			s.Close()
			return s.output(out), fmt.Errorf("still running after %s", timeout)
		}
	}
}

// failure describes how the session ended, with what bash itself said on
// its standard error (a block it could not read, say).
func (s *Session) failure() error {
	var exit *exec.ExitError
	if errors.As(s.waitErr, &exit) {
		msg := fmt.Sprintf("a command failed with exit status %d", exit.ExitCode())
		if e, _ := os.ReadFile(filepath.Join(s.scripts, "session.err")); len(e) > 0 {
			msg += "; bash: " + strings.TrimSpace(string(e))
		}
		return errors.New(msg)
	}
	if s.waitErr != nil {
		return s.waitErr
	}
	return errors.New("the session ended (exit)")
}

// output is what a block printed.
func (s *Session) output(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// Close ends the session and everything its blocks started.
func (s *Session) Close() {
	_ = s.stdin.Close()
	if s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-s.exited
}

// quote is s as one bash word.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
