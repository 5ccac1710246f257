package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/store"
)

// newAuditAdopt is `contextd audit adopt`: an operator holding the audit
// key gives each chain that has entries but no seal (written before the
// deployment had a key, or before sealing began) a start seal over them.
// It signs what the database holds, so nothing runs it on its own: a
// server that did would sign whatever a database writer left there.
func newAuditAdopt() *cobra.Command {
	var db dbFlags
	var keyFile string
	cmd := &cobra.Command{
		Use:   "adopt",
		Short: "Seal the chains written without the audit key (check them first, best against a checkpoint)",
		Long: `adopt gives every chain that has entries but no seal a "start" seal, signed
with the audit key, over all of its entries: from then on verify accepts
them, and shows adopted_through. Entries written while a server had no key
(or before contextd sealed entries) have no seal, and verify refuses them
until they are adopted. adopt vouches for whatever the database holds now:
verify the chains first (contextd audit verify --checkpoint FILE with a
checkpoint taken before, when there is one). A chain that has any seal is
left alone.

The key: --audit-key-file, else CONTEXTD_AUDIT_KEY, else the embedded
default's audit.key in --data-dir.`,
		Example: `  contextd audit verify --project acme --checkpoint acme-cp.json && contextd audit adopt --audit-key-file /etc/contextd/audit.key`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := adoptKeys(keyFile, db)
			if err != nil {
				return err
			}
			return withDB(cmd, &db, func(ctx context.Context, url string) error {
				st, err := store.Open(ctx, store.Config{URL: url})
				if err != nil {
					return err
				}
				defer st.Close()
				adopted, err := st.AdoptChains(ctx, keys.Seal)
				if err != nil {
					return err
				}
				for _, a := range adopted {
					fmt.Fprintf(cmd.OutOrStdout(), "adopted chain %q through seq %d\n", a.Chain, a.Seq)
				}
				if len(adopted) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "every chain with entries has a seal already")
				}
				return nil
			})
		},
	}
	db.register(cmd)
	cmd.Flags().StringVar(&keyFile, "audit-key-file", os.Getenv("CONTEXTD_AUDIT_KEY_FILE"), "file with the audit key (env CONTEXTD_AUDIT_KEY_FILE, or the key itself in CONTEXTD_AUDIT_KEY)")
	return cmd
}

// adoptKeys finds the audit key as serve does; adopt needs one.
func adoptKeys(keyFile string, db dbFlags) (*evidence.Keys, error) {
	k, err := localKeys(keyFile, db)
	if err == nil && k == nil {
		err = errors.New("adopt needs the audit key: --audit-key-file or CONTEXTD_AUDIT_KEY")
	}
	return k, err
}

// localKeys is the audit key of a command that writes to the database
// itself: --audit-key-file, else CONTEXTD_AUDIT_KEY, else the embedded
// default's audit.key when it has one; nil when none is given.
func localKeys(keyFile string, db dbFlags) (*evidence.Keys, error) {
	switch {
	case keyFile != "":
		return evidence.LoadKeyFile(keyFile)
	case os.Getenv("CONTEXTD_AUDIT_KEY") != "":
		return evidence.ParseKey(os.Getenv("CONTEXTD_AUDIT_KEY"))
	case db.url == "":
		k, err := evidence.LoadKeyFile(filepath.Join(db.dataDir, "audit.key"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return k, err
	}
	return nil, nil
}
