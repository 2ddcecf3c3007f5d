package commands

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/cli"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

func newSpecCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "spec",
		Short: "Work with the spec.json of a rubric feature",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSpecLintCmd())
	return cmd
}

func newSpecLintCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "lint <spec.json>",
		Short: "Check a feature's spec.json and list the reference images a human still owes",
		Long: `lint checks a rubric feature's spec.json against the spec schema: required fields,
types, slugs, enum values, unknown keys, and the cross-references the loop relies on (a
canonical view, fixture or reference naming a state or appearance the target lists).
Each problem is printed with its path, e.g. targets[0].references[1].status. A reference
marked present must exist as a file inside the feature folder.

References marked needed or candidate are not errors: they are the worklist of images a
human has to supply or approve, printed after the errors. A target whose canonical view
has no reference entry at all appears there too.

Exit status: 0 valid, 1 invalid, 2 when the file cannot be read or is not JSON.`,
		Example: `  tribunal spec lint examples/rubric-feature/spec.json
  tribunal spec lint specs/habits/spec.json --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := argus.LintSpecFile(args[0])
			if err != nil {
				return cli.Exit(2, err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				err = cli.WriteJSON(out, rep)
			} else {
				err = writeSpecLintText(out, args[0], rep)
			}
			if err != nil {
				return cli.Exit(2, fmt.Errorf("write report: %w", err))
			}
			if !rep.Valid {
				return cli.Exit(1, nil)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON: {valid, errors:[{path,message}], reference_worklist:[...]}")
	return cmd
}

// writeSpecLintText prints errors, then the reference worklist, then a summary line.
func writeSpecLintText(w io.Writer, path string, rep *argus.LintReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range rep.Errors {
		fmt.Fprintf(tw, "error\t%s\t%s\n", e.Path, e.Message)
	}
	for _, item := range rep.ReferenceWorklist {
		what := item.Status
		if item.Canonical {
			what += ", canonical"
		}
		if item.Undeclared {
			what += ", no manifest entry"
		}
		file := item.File
		if file == "" {
			file = "(no file named)"
		}
		fmt.Fprintf(tw, "reference\t%s/%s/%s\t%s: %s\n", item.Target, item.State, item.Appearance, what, file)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "valid"
	if !rep.Valid {
		verdict = "INVALID"
	}
	_, err := fmt.Fprintf(w, "%s: %s (%d error(s), %d reference(s) waiting for a human)\n",
		path, verdict, len(rep.Errors), len(rep.ReferenceWorklist))
	return err
}
