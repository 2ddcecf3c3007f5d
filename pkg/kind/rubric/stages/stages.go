// Package stages is the rubric kind's stages: planning a feature's views from its
// folder, rendering a view with a sensor, the Argus gates (with the view's previous
// render and baseline from the views bucket) and the judge's scoring of one render. The
// kind's rules (pkg/kind/rubric) run the loop.
package stages

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/commands"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// Kind is the rubric kind with its stages.
type Kind struct{ rubric.Kind }

var (
	_ stage.Kind            = Kind{}
	_ stage.Commanding      = Kind{}
	_ stage.StateCommanding = Kind{}
	_ stage.Selecting       = Kind{}
	_ stage.Prompting       = Kind{}
)

// Commands are rubric's own subcommands: `contrast` and `spec lint`.
func (Kind) Commands() []*cobra.Command { return commands.Commands() }

// StateCommands are rubric's subcommands on a batch's state: `spotcheck` (HE-2) and
// `view-reset`.
func (Kind) StateCommands(env stage.CommandEnv) []*cobra.Command {
	return commands.StateCommands(env)
}

// Prompt is the HE-2 question of an interactive `tribunal run` on its terminal.
func (Kind) Prompt(lines <-chan string, out io.Writer, st stage.CommandState, tenant, batch string) stage.Prompt {
	return commands.NewPrompt(lines, out, st, tenant, batch)
}
