package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOutcomeAndOutcomes: contextd outcome records how a packet's answer
// went, reading the answer from a file, and names what it used; contextd
// outcomes lists them; a bad status is the API's 422 with its pointer.
func TestOutcomeAndOutcomes(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	require.Equal(t, 201, put(t, r.base+"/v1/projects/acme", r.key, `{}`))
	r.ok("items", "put", "refund.rules", "Refunds over 500 EUR need a manager's approval.", "--always")
	_, e := r.ok("packets", "assemble", "--role", "implementer", "--message", "a refund of 700 EUR")
	id := regexp.MustCompile(`^packet (\S+):`).FindStringSubmatch(e)[1]

	answer := filepath.Join(t.TempDir(), "answer.txt")
	require.NoError(t, os.WriteFile(answer, []byte("I approved it. Refunds over 500 EUR need a manager's approval.\n"), 0o600))
	o, _ := r.ok("outcome", id, "--status", "failure", "--answer-file", answer, "--label", "approved_without_manager", "--score", "0.1")
	require.Regexp(t, `^outcome out_\S+ of packet `+id+`: failure \(agent\)\n`, o)
	require.Contains(t, o, "  item refund.rules v1 (exact, similarity 1.00)\n")
	r.ok("outcome", id, "--status", "success", "--source", "human")

	o, _ = r.ok("outcomes", id)
	require.Regexp(t, `(?m)^1\s+failure\s+agent\s+0\.10\s+approved_without_manager\s+refund\.rules\s`, o)
	require.Regexp(t, `(?m)^2\s+success\s+human\s+-\s+-\s+-\s`, o)

	e = r.fail("outcome", id, "--status", "meh")
	require.Contains(t, e, "422 validation_failed")
	require.Contains(t, e, "/status")
}
