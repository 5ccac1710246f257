package app_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeMode writes a file of the given mode, whatever the umask.
func writeMode(t *testing.T, path, text string, mode os.FileMode) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	require.NoError(t, os.Chmod(path, mode))
	return path
}

// An audit key file, or a config file holding the audit key, that group
// or others may open stops the start with the command that fixes it;
// only its owner's is accepted.
func TestSecretFilesMustBePrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("modes are not checked off Unix")
	}
	dir := t.TempDir()
	for mode, ok := range map[os.FileMode]bool{0o600: true, 0o400: true, 0o644: false, 0o640: false} {
		key := writeMode(t, filepath.Join(dir, fmt.Sprintf("audit-%o.key", mode)), testKey+"\n", mode)
		_, err := parse(t, "--audit-key-file", key)
		if ok {
			require.NoError(t, err, "%#o", mode)
			continue
		}
		require.ErrorContains(t, err, fmt.Sprintf("--audit-key-file: audit key %s is readable by group or others (mode %#o): run chmod 600 %s", key, mode, key))
	}

	shared := writeMode(t, filepath.Join(dir, "shared.yaml"), "audit-key: "+testKey+"\n", 0o644)
	_, err := parse(t, "--config", shared)
	require.ErrorContains(t, err, "--config: config file with the audit key "+shared+" is readable by group or others (mode 0644): run chmod 600 "+shared)
	private := writeMode(t, filepath.Join(dir, "private.yaml"), "audit-key: "+testKey+"\n", 0o600)
	_, err = parse(t, "--config", private)
	require.NoError(t, err)
	plain := writeMode(t, filepath.Join(dir, "plain.yaml"), "rate-limit: 3\n", 0o644)
	_, err = parse(t, "--config", plain)
	require.NoError(t, err, "a config file without the key may be shared")
}
