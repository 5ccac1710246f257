package evidence_test

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/secretfile"
)

// keyFile writes a valid audit key to a new file of the given mode.
func keyFile(t *testing.T, mode os.FileMode) string {
	t.Helper()
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	path := filepath.Join(t.TempDir(), "audit.key")
	require.NoError(t, os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(seed)+"\n"), 0o600))
	require.NoError(t, os.Chmod(path, mode)) // whatever the umask
	return path
}

// A key file only its owner may open is loaded; one that group or others
// may open (read, or anything else) is refused with the command that
// fixes it.
func TestLoadKeyFileRefusesSharedModes(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("modes are not checked off Unix")
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		_, err := evidence.LoadKeyFile(keyFile(t, mode))
		require.NoError(t, err, "%#o", mode)
	}
	for mode, how := range map[os.FileMode]string{
		0o644: "readable by group or others (mode 0644)",
		0o640: "readable by group or others (mode 0640)",
		0o604: "readable by group or others (mode 0604)",
		0o620: "open to group or others (mode 0620)",
		0o601: "open to group or others (mode 0601)",
	} {
		path := keyFile(t, mode)
		_, err := evidence.LoadKeyFile(path)
		require.EqualError(t, err, "audit key "+path+" is "+how+": run chmod 600 "+path)
		require.EqualError(t, secretfile.CheckPath("audit key", path), err.Error())
	}
}

// The embedded default's key file is made 0600, and loads again.
func TestEnsureKeyFileIsPrivate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data", "audit.key")
	k, made, err := evidence.EnsureKeyFile(path)
	require.NoError(t, err)
	require.True(t, made)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	if runtime.GOOS != "windows" {
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}
	again, made, err := evidence.EnsureKeyFile(path)
	require.NoError(t, err)
	require.False(t, made)
	require.Equal(t, k.PublicKey(), again.PublicKey())
	loaded, err := evidence.LoadKeyFile(path)
	require.NoError(t, err)
	require.Equal(t, k.PublicKey(), loaded.PublicKey())
}

// A missing file is still reported as missing (EnsureKeyFile makes one
// then).
func TestLoadKeyFileMissing(t *testing.T) {
	t.Parallel()
	_, err := evidence.LoadKeyFile(filepath.Join(t.TempDir(), "none"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, "audit key: ")
}
