package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/services/internal/auth"
	"github.com/axsched/ax/services/internal/store"
)

// newKeyCmd manages API keys straight in MySQL, like `ax migrate`: the
// first admin key cannot need a key. With a key, POST /v1/keys does the
// same through the API.
func newKeyCmd() *cobra.Command {
	var flags dsnFlags
	cmd := &cobra.Command{Use: "key", Short: "Create, list and revoke API keys (in MySQL; needs no key)"}
	flags.register(cmd.PersistentFlags())
	open := func(cmd *cobra.Command) (*store.Store, error) {
		dsn, err := flags.resolveTLS(cmd.Flags())
		if err != nil {
			return nil, err
		}
		return store.Open(cmd.Context(), dsn, store.Options{Actor: "ax key", MaxOpenConns: 2})
	}

	var name, role string
	var expiresIn time.Duration
	create := &cobra.Command{
		Use: "create --name NAME --role ROLE", Short: "Create a key and print its token, once", Args: cobra.NoArgs,
		Example: "  ax key create --name alice --role operate > alice.token",
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := auth.ParseRole(role)
			if err != nil {
				return err
			}
			if expiresIn < 0 {
				return fmt.Errorf("--expires-in %s is negative", expiresIn)
			}
			var expires *time.Time
			if expiresIn > 0 {
				at := time.Now().Add(expiresIn)
				expires = &at
			}
			st, err := open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			tok, k, err := auth.CreateKey(cmd.Context(), st, name, r, expires)
			if errors.Is(err, store.ErrNameTaken) {
				return fmt.Errorf("a key named %q exists or existed; names are never reused (rotate to %s-2)", name, name)
			}
			if err != nil {
				return err
			}
			// The token alone on stdout, so that it can be redirected to a
			// file; the rest goes to stderr.
			fmt.Fprintln(cmd.OutOrStdout(), tok.Secret)
			fmt.Fprintf(cmd.ErrOrStderr(), "created key %s (role %s); the token above is shown this once\n", k.Name, k.Role)
			return nil
		},
	}
	create.Flags().StringVar(&name, "name", "", "key name: 1-64 of a-z 0-9 . _ - (required)")
	create.Flags().StringVar(&role, "role", "", "submit, read, operate or admin (required)")
	create.Flags().DurationVar(&expiresIn, "expires-in", 0, "end the key after this long (0: never)")

	list := &cobra.Command{
		Use: "list", Short: "List keys, revoked ones included (never their tokens)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			keys, err := st.ListAPIKeys(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tPREFIX\tCREATED\tLAST USED\tEXPIRES\tREVOKED")
			for _, k := range keys {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, k.Role, k.Prefix, k.CreatedAt.Format(time.RFC3339),
					timeOr(k.LastUsedAt, "never"), timeOr(k.ExpiresAt, "never"), timeOr(k.RevokedAt, "-"))
			}
			return tw.Flush()
		},
	}

	revoke := &cobra.Command{
		Use: "revoke NAME", Short: "Revoke a key; every process refuses it within 5 s", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			if _, err := st.RevokeAPIKey(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked key %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func timeOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.Format(time.RFC3339)
}
