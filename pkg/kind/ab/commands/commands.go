// Package commands is the ab kind's own CLI subcommands (`tribunal shuffle`, `tribunal
// calibrate`, `tribunal cfn-ab-critic`) and its gold set (`tribunal review --export-gold`). The kind's stages hand
// them to the registry (stage.Commanding, stage.StateCommanding, stage.GoldExporting), and
// cmd/tribunal adds them to its command tree with every other command, so they take the
// same TRIBUNAL_* variables, flag suggestions, help and exit statuses.
package commands

import (
	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// Commands are the ab kind's subcommands, built afresh for each command tree.
func Commands() []*cobra.Command {
	return []*cobra.Command{newShuffleCmd()}
}

// StateCommands are the ab kind's subcommands over the CLI's env: `calibrate`, which
// judges its set with the judge the CLI's flags configure, and `cfn-ab-critic`, seed 000's
// flow over the state folder with the external judge.
func StateCommands(env stage.CommandEnv) []*cobra.Command {
	return []*cobra.Command{newCalibrateCmd(env), newCFNCmd(env)}
}
