// Package commands is the ab kind's own CLI subcommands (`tribunal shuffle`). The kind's
// stages hand them to the registry (stage.Commanding), and cmd/tribunal adds them to its
// command tree with every other command, so they take the same TRIBUNAL_* variables, flag
// suggestions, help and exit statuses.
package commands

import "github.com/spf13/cobra"

// Commands are the ab kind's subcommands, built afresh for each command tree.
func Commands() []*cobra.Command {
	return []*cobra.Command{newShuffleCmd()}
}
