package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/internal/errcode"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/opener"
	"github.com/starplan/starplan/tokens"
)

// tokenOptions are the options of `starplan token` and its subcommands.
type tokenOptions struct {
	JSON    bool
	Name    string
	Role    string
	Subject string // --subject: the one subject a proposer's token acts for
	Expires string // --expires: an age (30d, 12h); "" never expires
}

// tokenCreated is what `token create --json` prints: the secret, once.
type tokenCreated struct {
	Name    string      `json:"name"`
	Role    access.Role `json:"role"`
	Subject string      `json:"subject,omitempty"`
	Token   string      `json:"token"`
	Expires *time.Time  `json:"expires_at"`
}

func newTokenCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &tokenOptions{}
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke the named tokens of starplan serve",
		Long: `starplan serve admits a client by its bearer token. Each token has a name and a role:

  proposer  describe, check, dry runs, ask, list and show runs, reject its own runs
  approver  a proposer's rights, plus apply and reject any run, and sign in to the review page
  admin     everything: an approver's rights, plus tokens, prune and replay

The store keeps a token's name, role, dates and the SHA-256 of its secret; the secret is printed
once, by create, and never again. The token in serve.token (or --token, STARPLAN_TOKEN) is the
admin token named "admin". While serve runs on the store these commands run inside it (and a
revocation holds from the next request, page sessions made with the token included); without a
server they open the store directly. Either way they act as the local user, an admin.`,
		Example: `  starplan token create agent-1 --role proposer --expires 30d
  starplan token create alice --role approver --json
  starplan token list
  starplan token revoke agent-1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTokenList(ios, g, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the tokens as JSON")
	create := &cobra.Command{
		Use:   "create NAME --role proposer|approver|admin",
		Short: "Create a token and print its secret, once",
		Example: `  starplan token create agent-1 --role proposer --expires 30d
  starplan token create agent-c1 --role proposer --subject C1
  starplan token create alice --role approver --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runTokenCreate(cmd.Context(), ios, g, opts)
		},
	}
	create.Flags().StringVar(&opts.Role, "role", "", "the token's role: proposer, approver or admin (required)")
	create.Flags().StringVar(&opts.Subject, "subject", "", "pin a proposer's token to one subject: its runs act for it and may name no other")
	create.Flags().StringVar(&opts.Expires, "expires", "", "how long the token lives: 30d, 12h (default: until revoked)")
	create.Flags().BoolVar(&opts.JSON, "json", false, `print {"name", "role", "token", "expires_at"}`)
	_ = create.RegisterFlagCompletionFunc("role", cobra.FixedCompletions([]string{"proposer", "approver", "admin"}, cobra.ShellCompDirectiveNoFileComp))
	list := &cobra.Command{
		Use:     "list",
		Short:   "List the tokens: name, role, created, last used, expires (never a secret)",
		Example: "  starplan token list --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTokenList(ios, g, opts)
		},
	}
	list.Flags().BoolVar(&opts.JSON, "json", false, "print the tokens as JSON")
	revoke := &cobra.Command{
		Use:     "revoke NAME",
		Short:   "Revoke a token: it is refused from the next request on",
		Example: "  starplan token revoke agent-1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runTokenRevoke(cmd.Context(), ios, g, opts)
		},
	}
	revoke.Flags().BoolVar(&opts.JSON, "json", false, "print the revoked token as JSON")
	cmd.AddCommand(throughServer(create), throughServer(list), throughServer(revoke))
	return throughServer(cmd)
}

// tokenError maps a refusal of package tokens to a usage error with its hint.
func tokenError(err error) error {
	if te, ok := tokens.AsError(err); ok {
		return withReason(errcode.BadRequest, withCode(ExitUsage, err, te.Hint))
	}
	return withCode(ExitInternal, err, "")
}

// keeper is the store's tokens, under the local user's clock.
func keeper(o openedStore) *tokens.Keeper { return tokens.New(o.st, nil) }

func runTokenCreate(ctx context.Context, ios IOStreams, g *globalOptions, opts *tokenOptions) error {
	role, err := access.ParseRole(opts.Role)
	if err != nil {
		if opts.Role == "" {
			err = fmt.Errorf("--role is required")
		}
		return withCode(ExitUsage, err, "--role proposer, approver or admin")
	}
	var ttl time.Duration
	if opts.Expires != "" {
		if ttl, err = parseAge(opts.Expires); err != nil {
			return withCode(ExitUsage, fmt.Errorf("--expires %q: not an age (30d, 12h, 90m)", opts.Expires), "--expires 30d")
		}
	}
	return withStore(ios, g, opener.Options{}, func(st openedStore) error {
		secret, info, err := keeper(st).CreateFor(ctx, opts.Name, role, ttl, opts.Subject)
		if err != nil {
			return tokenError(err)
		}
		if opts.JSON || !ios.OutTTY {
			return writeJSON(ios.Out, tokenCreated{Name: info.Name, Role: info.Role, Subject: info.Subject, Token: secret, Expires: info.Expires})
		}
		fmt.Fprintf(ios.Out, "Created token %s (%s), %s.\n\n  %s\n\nThis is the only time it is shown: keep it now. Clients send it as Authorization: Bearer TOKEN.\n",
			safe(info.Name), info.Role, expiry(info.Expires), secret)
		return nil
	})
}

func runTokenList(ios IOStreams, g *globalOptions, opts *tokenOptions) error {
	return withStore(ios, g, opener.Options{}, func(st openedStore) error {
		list, err := keeper(st).List()
		if err != nil {
			return tokenError(err)
		}
		if opts.JSON || !ios.OutTTY {
			return writeJSON(ios.Out, map[string]any{"tokens": list})
		}
		if len(list) == 0 {
			admin := "serve.token in the store directory"
			if _, local := st.st.(store.Local); !local {
				admin = "the one serve is given (STARPLAN_TOKEN or --token)"
			}
			fmt.Fprintf(ios.Out, "No tokens yet; the admin token is %s. starplan token create NAME --role proposer makes one.\n", admin)
			return nil
		}
		fmt.Fprintf(ios.Out, "%-24s %-9s %-20s %-20s %s\n", "NAME", "ROLE", "CREATED", "LAST USED", "EXPIRES")
		for _, t := range list {
			last, exp := "never", "never"
			if t.LastUsed != nil {
				last = t.LastUsed.Local().Format("2006-01-02 15:04")
			}
			if t.Expires != nil {
				exp = t.Expires.Local().Format("2006-01-02 15:04")
			}
			if t.Revoked != nil {
				exp = "revoked " + t.Revoked.Local().Format("2006-01-02 15:04")
			}
			fmt.Fprintf(ios.Out, "%-24s %-9s %-20s %-20s %s\n", safe(t.Name), t.Role, t.Created.Local().Format("2006-01-02 15:04"), last, exp)
		}
		return nil
	})
}

func runTokenRevoke(ctx context.Context, ios IOStreams, g *globalOptions, opts *tokenOptions) error {
	return withStore(ios, g, opener.Options{}, func(st openedStore) error {
		info, err := keeper(st).Revoke(ctx, opts.Name)
		if err != nil {
			return tokenError(err)
		}
		if opts.JSON || !ios.OutTTY {
			return writeJSON(ios.Out, info)
		}
		fmt.Fprintf(ios.Out, "Revoked token %s (%s): it is refused from the next request on, page sessions made with it included.\n", safe(info.Name), info.Role)
		return nil
	})
}

// expiry says when a token expires.
func expiry(t *time.Time) string {
	if t == nil {
		return "valid until revoked"
	}
	return "valid until " + t.Local().Format(timeLayout)
}
