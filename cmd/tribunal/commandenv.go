package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// commandEnv is the CLI as a kind's commands see it (stage.CommandEnv): the connection
// flags and the state folder every command that reads the state takes, opened as inState
// opens it, and the judge flags every command that judges takes, judging as run does.
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

// JudgeFlags implements stage.CommandEnv.
func (commandEnv) JudgeFlags(fs *pflag.FlagSet) stage.Judge {
	j := &cliJudge{}
	j.flags.register(fs)
	return j
}

// cliJudge is the judge of a kind's command (stage.Judge): its judgeFlags, and the
// all-in-one mode run uses.
type cliJudge struct{ flags judgeFlags }

func (j *cliJudge) ScriptedByFixtures() bool {
	return j.flags.provider == "scripted" && j.flags.scriptedAnswers == ""
}

func (j *cliJudge) UseAnswers(p string) { j.flags.scriptedAnswers = p }

func (j *cliJudge) SetFixture(flag, setting string) { j.flags.setFixture(flag, setting) }

// JudgeBatch judges a batch in the all-in-one mode (an embedded NATS server and file
// storage in a temporary folder) and returns its final job records.
func (j *cliJudge) JudgeBatch(ctx context.Context, b *batch.Batch, concurrency int, quiet bool) ([]*records.Job, error) {
	dataDir, err := os.MkdirTemp("", "tribunal-calibrate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dataDir)
	env, err := startEmbedded(ctx, dataDir, true, "", concurrency, &j.flags, artifact.FetchOptions{}, nil, nil)
	if err != nil {
		return nil, exitError{2, err}
	}
	defer env.Close()
	sub := &client.Submitter{Pub: env.Running.Pub, Store: env.Store}
	s, err := sub.Submit(ctx, b, cmp.Or(b.Tenant, "default"), client.NewBatchID(b))
	if err != nil {
		return nil, err
	}
	progress := newProgress(os.Stderr, quiet)
	if _, err := client.Watch(ctx, env.Running.Buckets, s.Tenant, s.BatchID, 100*time.Millisecond, progress.report); err != nil {
		return nil, fmt.Errorf("calibration batch %s: %w", s.BatchID, err)
	}
	return records.New(env.Running.Buckets).LoadJobs(ctx, s.Tenant, s.BatchID)
}

// exportGold writes the batch's reviewed jobs into dir as a calibration set, each kind
// that makes one (stage.GoldExporting) taking its own, and returns how many it wrote.
func exportGold(ctx context.Context, store blob.Store, jobs []*records.Job, dir string) (int, error) {
	n := 0
	for _, k := range registry.All() {
		if g, ok := k.(stage.GoldExporting); ok {
			m, err := g.ExportGold(ctx, store, jobs, dir)
			if err != nil {
				return n, err
			}
			n += m
		}
	}
	return n, nil
}
