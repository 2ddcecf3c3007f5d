package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// commandEnv is the CLI as a kind's commands on a batch's state see it
// (stage.CommandEnv): the connection flags and the state folder every command that reads
// the state takes, opened as inState opens it.
type commandEnv struct{}

// StateFlags implements stage.CommandEnv.
func (commandEnv) StateFlags(fs *pflag.FlagSet, command string) stage.OpenState {
	conn := &connFlags{}
	conn.register(fs)
	conn.registerLocalInput(fs, command)
	return func(ctx context.Context, fn func(stage.CommandState) error) error {
		return inState(ctx, conn, func(env *clientEnv, b bus.Buckets) error {
			return fn(stage.CommandState{Buckets: b, Store: env.store, Pub: env.pub, Applied: env.applied})
		})
	}
}
