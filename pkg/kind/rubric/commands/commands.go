// Package commands is the rubric kind's own CLI subcommands (`tribunal contrast`,
// `tribunal spec lint`): Argus's deterministic checks run by hand. The kind's stages hand
// them to the registry (stage.Commanding), and cmd/tribunal adds them to its command tree
// with every other command, so they take the same TRIBUNAL_* variables, flag suggestions,
// help and exit statuses.
package commands

import (
	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// Commands are the rubric kind's subcommands, built afresh for each command tree.
func Commands() []*cobra.Command {
	return []*cobra.Command{newContrastCmd(), newSpecCmd()}
}

// StateCommands are the rubric kind's subcommands that record a person's step on a
// batch's state (`tribunal spotcheck`, `tribunal view-reset`), over the CLI's env.
func StateCommands(env stage.CommandEnv) []*cobra.Command {
	return []*cobra.Command{newSpotcheckCmd(env), newViewResetCmd(env)}
}
