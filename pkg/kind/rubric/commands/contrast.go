package commands

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/cli"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

func newContrastCmd() *cobra.Command {
	var tokensPath, pairsPath, appearances string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "contrast --tokens tokens.json --pairs contrast-pairs.json",
		Short: "Check declared colour pairs against their WCAG 2.x contrast minimum",
		Long: `contrast is the token_contrast gate of the rubric judge kind, run by hand. It reads the
design-system colours from tokens.json and the foreground/background pairs from
contrast-pairs.json, blends translucent foregrounds over their background, and measures
every pair in every appearance the tokens define (or the ones given with --appearances).

A pair fails when its exact ratio is below its minimum (4.5 unless the pair says
otherwise): ratios are shown to two decimals, but 4.499 does not meet 4.5. A pair's
whitelist exempts appearances from failing; they are still measured.

Exit status: 0 when every pair passes, 1 when one fails, 2 when the input cannot be read
or names a colour that does not exist.`,
		Example: `  tribunal contrast --tokens examples/rubric-feature/tokens.json --pairs examples/rubric-feature/contrast-pairs.json
  tribunal contrast --tokens tokens.json --pairs contrast-pairs.json --appearances dark --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := runContrast(tokensPath, pairsPath, appearances)
			if err != nil {
				return cli.Exit(2, err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := cli.WriteJSON(out, rep); err != nil {
					return cli.Exit(2, fmt.Errorf("write report: %w", err))
				}
			} else if err := writeContrastText(out, rep); err != nil {
				return cli.Exit(2, fmt.Errorf("write report: %w", err))
			}
			if !rep.Pass {
				return cli.Exit(1, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tokensPath, "tokens", "", "tokens.json with the design-system colours (required)")
	cmd.Flags().StringVar(&pairsPath, "pairs", "", "contrast-pairs.json declaring the pairs to check (required)")
	cmd.Flags().StringVar(&appearances, "appearances", "", "comma-separated appearances to check (default: every appearance in the tokens)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	_ = cmd.MarkFlagRequired("tokens")
	_ = cmd.MarkFlagRequired("pairs")
	return cmd
}

// runContrast reads both files and measures the pairs.
func runContrast(tokensPath, pairsPath, appearances string) (*argus.ContrastReport, error) {
	data, err := os.ReadFile(tokensPath)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	tokens, err := argus.ParseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tokensPath, err)
	}
	data, err = os.ReadFile(pairsPath)
	if err != nil {
		return nil, fmt.Errorf("read pairs: %w", err)
	}
	pairs, err := argus.ParseContrastPairs(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pairsPath, err)
	}
	var apps []string
	for _, a := range strings.Split(appearances, ",") {
		if a = strings.TrimSpace(a); a != "" {
			apps = append(apps, a)
		}
	}
	rep, err := argus.CheckContrast(tokens, pairs, apps)
	if err != nil {
		return nil, fmt.Errorf("contrast: %w", err)
	}
	return rep, nil
}

// writeContrastText prints one aligned row per measured pair and a verdict line.
func writeContrastText(w io.Writer, rep *argus.ContrastReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tFOREGROUND\tBACKGROUND\tAPPEARANCE\tRATIO\tMIN")
	for _, p := range rep.Pairs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Status, p.FG, p.BG, p.Appearance,
			strconv.FormatFloat(p.Ratio, 'f', 2, 64), strconv.FormatFloat(p.Min, 'f', -1, 64))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "PASS"
	if !rep.Pass {
		verdict = "FAIL"
	}
	_, err := fmt.Fprintf(w, "contrast: %s (%d measured, %d failing)\n", verdict, len(rep.Pairs), len(rep.Failures))
	return err
}
