// Package cli is contextd's command line. `serve`, `migrate`, `audit adopt`
// and `agents create --database-url` work on the database; every other
// command is a client of a running server, told where and who the same way
// (clientFlags: --url/CONTEXTD_URL, --key/CONTEXTD_KEY, the client config
// file).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/pgcluster"
)

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		code := 1
		if ec, ok := errors.AsType[*exitCode](err); ok {
			code, err = ec.code, ec.err
		}
		if err != nil {
			fmt.Fprintln(stderr, "contextd:", err)
			printErrorHelp(stderr, err)
		}
		return code
	}
	return 0
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "contextd",
		Short:         "A persistent context store for LLM agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newServe(), newMigrate(), newAgents(), newProjects(), newWhy(), packetAttribute("attribute"), newPacket(), newHandoffs(), newAudit(), newBench(), newItems(), newInjections(), newVersion(), newConfig(), newDemo(),
		newOutcome(), newOutcomes(), newAblate(), newBisect(), newSuspects(), newLedger(), newProposals())
	return root
}

// dbFlags are the flags of the commands that work straight on the database.
type dbFlags struct {
	url     string
	dataDir string
}

func (f *dbFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL (env DATABASE_URL); empty: the embedded default cluster")
	cmd.Flags().StringVar(&f.dataDir, "data-dir", app.EnvOr("CONTEXTD_DATA_DIR", ".contextd"), "data directory of the embedded default cluster (env CONTEXTD_DATA_DIR)")
}

// open returns the database URL to use and, for the embedded default, the
// cluster (started, or found running) so the caller can stop it.
func (f *dbFlags) open(ctx context.Context, stderr io.Writer) (string, *pgcluster.Cluster, error) {
	if f.url != "" {
		return f.url, nil, nil
	}
	abs, err := filepath.Abs(f.dataDir)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(stderr, "contextd: no DATABASE_URL; using the embedded PostgreSQL cluster in %s\n", abs)
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: abs, Logf: func(format string, args ...any) {
		fmt.Fprintf(stderr, "contextd: "+format+"\n", args...)
	}})
	if err != nil {
		return "", nil, fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	return c.URL(pgcluster.DefaultDatabase), c, nil
}
