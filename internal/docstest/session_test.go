package docstest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSessionKeepsStateBetweenBlocks(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	s, err := StartSession(work, t.TempDir(), []string{"PATH=" + os.Getenv("PATH"), "GREETING=hello"})
	require.NoError(t, err)
	defer s.Close()

	out, err := s.Run("X=42\nmkdir sub && cd sub\nf() { echo \"f $1\"; }\necho \"$GREETING\" >&2\n", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "hello\n", out, "standard error is part of the output")
	out, err = s.Run("echo \"$X $(basename \"$PWD\")\"; f y\n", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "42 sub\nf y\n", out)
	_, err = os.Stat(filepath.Join(work, "sub"))
	require.NoError(t, err)
}

func TestSessionFailsAtTheFirstFailingCommand(t *testing.T) {
	t.Parallel()
	s, err := StartSession(t.TempDir(), t.TempDir(), []string{"PATH=" + os.Getenv("PATH")})
	require.NoError(t, err)
	defer s.Close()

	out, err := s.Run("echo before\nfalse | cat\necho after\n", time.Minute)
	require.ErrorContains(t, err, "exit status 1")
	require.Equal(t, "before\n", out, "pipefail: a failing command in a pipe fails the block")
	_, err = s.Run("echo next\n", time.Minute)
	require.Error(t, err, "the session ended with the block")
}

func TestSessionBoundsABlock(t *testing.T) {
	t.Parallel()
	s, err := StartSession(t.TempDir(), t.TempDir(), []string{"PATH=" + os.Getenv("PATH")})
	require.NoError(t, err)
	defer s.Close()

	out, err := s.Run("echo started\nsleep 60 &\nsleep 30\n", 500*time.Millisecond)
	require.ErrorContains(t, err, "still running after 500ms")
	require.Equal(t, "started\n", out)
}
