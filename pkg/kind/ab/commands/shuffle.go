package commands

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/cli"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

func newShuffleCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "shuffle <ac-id> <iteration>",
		Short: "Print the blind A/B label assignment of an AC, as an auditor re-derives it",
		Long: `shuffle prints which slot held which artifact for an ab comparison. The assignment is a pure
function of the AC id and the iteration (SHA-256 of "<ac-id>|<iteration>" plus a newline, first
8 hex digits, mod 2), so anyone can check a manifest's label_assignment without trusting it.`,
		Example: `  tribunal shuffle AC-7 0     # A=ours,B=reference
  tribunal shuffle AC-7 0 --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			it, err := strconv.Atoi(args[1])
			if err != nil || it < 0 {
				return cli.Exit(2, fmt.Errorf("iteration %q: want a whole number >= 0", args[1]))
			}
			a := ab.Assign(args[0], it)
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"ac_id": args[0], "iteration": it, "label_assignment": a, "assignment": a.String()})
			}
			fmt.Fprintln(cmd.OutOrStdout(), a.String())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the assignment as JSON")
	return cmd
}
