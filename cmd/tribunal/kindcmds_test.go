package main

import "github.com/spf13/cobra"

// kindCommand is the kind's command called name as the command tree holds it
// (kindCommands), built afresh, for the tests that run one command in-process.
func kindCommand(name string) *cobra.Command {
	for _, c := range kindCommands() {
		if c.Name() == name {
			return c
		}
	}
	panic("no kind supplies the command " + name)
}

func newContrastCmd() *cobra.Command { return kindCommand("contrast") }

func newSpecCmd() *cobra.Command { return kindCommand("spec") }

func newCalibrateCmd() *cobra.Command { return kindCommand("calibrate") }
