package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/agentry-dev/agentry/internal/approverkey"
	"github.com/spf13/cobra"
)

// defaultKeysDir is where approver keys live unless --dir or
// AGENTRY_KEYS_DIR say otherwise.
const defaultKeysDir = "./agentry-data/keys"

// fromEnv sets *p from the environment variable when the command line
// left flag unset.
func fromEnv(cmd *cobra.Command, flag, variable string, p *string) {
	if cmd.Flags().Changed(flag) {
		return
	}
	if v := os.Getenv(variable); v != "" {
		*p = v
	}
}

func keysCmd(e *env) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage approver keys: the Ed25519 keys that sign UAICP approval tokens",
		Long: `Manage approver keys. A write_high_risk tool call runs only with an approval
token (UAICP 0.3 §5.3): a JWS signed by an approver key the governor trusts.

A key directory (--dir, default $AGENTRY_KEYS_DIR or ` + defaultKeysDir + `) holds
each approver's private key, NAME.key.json (mode 0600; keep it private), and
approvers.json, the keyring of their public keys that a governor loads.`,
		Example: `  agentry keys create alice
  agentry keys list
  agentry approve APPROVAL_ID --as alice`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", defaultKeysDir, "key directory (env AGENTRY_KEYS_DIR)")

	var force bool
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an approver key and trust it in the directory's keyring",
		Long: `Create an Ed25519 key for approver NAME: DIR/NAME.key.json (mode 0600), its
public key added to DIR/approvers.json. An existing key of that name is kept
unless --force, which replaces it and revokes every key the keyring held for
NAME.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fromEnv(cmd, "dir", "AGENTRY_KEYS_DIR", &dir)
			name := args[0]
			if !approverkey.ValidName(name) {
				return usageError("%q cannot name an approver key: use letters, digits and ._@+-", name)
			}
			d := approverkey.Dir(dir)
			create := d.Create
			if force {
				create = d.Replace
			}
			k, err := create(name)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("approver %s already has a key in %s; --force replaces it (and revokes the old one)", name, dir)
			}
			if err != nil {
				return err
			}
			kid, err := k.KeyID()
			if err != nil {
				return err
			}
			path, _ := d.KeyPath(name)
			fmt.Fprintf(e.stdout, "approver  %s\nkid       %s\nkey       %s (private)\nkeyring   %s\n", name, kid, path, d.KeyringPath())
			return nil
		},
	}
	create.Flags().BoolVar(&force, "force", false, "replace an existing key of that name, revoking the old one")
	cmd.AddCommand(create)

	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the trusted approver keys: approver and kid, one per line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fromEnv(cmd, "dir", "AGENTRY_KEYS_DIR", &dir)
			d := approverkey.Dir(dir)
			kr, err := d.Keyring()
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no keyring at %s; create a key with: agentry keys create NAME --dir %s", d.KeyringPath(), dir)
			}
			if err != nil {
				return err
			}
			for _, k := range kr.Keys() {
				fmt.Fprintf(e.stdout, "%s\t%s\n", k.Approver, k.KID)
			}
			return nil
		},
	})
	return cmd
}
