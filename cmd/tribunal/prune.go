package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/localstate"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
)

func newPruneCmd() *cobra.Command {
	var (
		dataDir, blobURL  string
		keep              int
		olderThan         time.Duration
		dropCache, dryRun bool
		asJSON            bool
	)
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove old batches from the state `tribunal run` keeps",
		Long: `prune removes old batches from a state folder (.tribunal unless --data-dir names another):
their job and batch records, the events stored before the oldest batch that stays, and
every blob that nothing left refers to. Batches still running stay, and so does every
batch holding a rubric view that a staying batch continues (the audit replays a view's
loop from its first run). Rubric view state stays (the next run continues the loop), and
so does the judge-call cache unless --drop-cache: a rerun of a pruned batch is still
answered from it. Results written under out/ are never touched.

Say what goes with --keep (keep the newest N batches) and/or --older-than (only batches
created longer ago go); --dry-run shows the decision for every batch and changes nothing.
prune takes the folder like tribunal run does: it waits for a run, and a tribunal view
steps aside for it.`,
		Example: `  tribunal prune --dry-run
  tribunal prune --keep 20
  tribunal prune --older-than 720h --drop-cache`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keep < 0 || olderThan < 0 {
				return exitError{2, fmt.Errorf("--keep and --older-than must not be negative")}
			}
			if keep == 0 && olderThan == 0 && !dryRun && !dropCache {
				return exitError{2, fmt.Errorf("say what to prune: --keep N (keep the newest N batches) and/or --older-than DURATION; --dry-run shows the batches")}
			}
			if !localstate.Exists(dataDir) {
				return exitError{2, fmt.Errorf("no tribunal state in %s (or give --data-dir)", dataDir)}
			}
			ctx := cmd.Context()
			lock, err := lockState(ctx, dataDir, "prune", asJSON)
			if err != nil {
				return err
			}
			defer lock.Release()
			env, err := openState(ctx, dataDir, blobURL)
			if err != nil {
				return err
			}
			defer env.Close()
			o := localstate.PruneOptions{Keep: keep, DropCache: dropCache, DryRun: dryRun}
			if olderThan > 0 {
				o.Before = time.Now().Add(-olderThan)
			}
			// Blobs elsewhere (--blob) may be shared with other users of that store.
			fs, _ := env.Store.(*fileblob.Store)
			before := dirBytes(dataDir)
			rep, err := localstate.Prune(ctx, env.Running.JS, env.Running.Buckets, fs, o)
			if err != nil {
				return err
			}
			env.Close()
			if asJSON {
				return writeJSON(os.Stdout, rep)
			}
			printPrune(os.Stdout, dataDir, rep, before, dirBytes(dataDir), fs == nil)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&dataDir, "data-dir", localstate.DirName, "the state folder tribunal run keeps")
	fs.StringVar(&blobURL, "blob", "", "the blob store, when tribunal run was given --blob (its blobs are then left alone)")
	fs.IntVar(&keep, "keep", 0, "keep the newest N batches")
	fs.DurationVar(&olderThan, "older-than", 0, "only batches created longer ago than this go (e.g. 720h)")
	fs.BoolVar(&dropCache, "drop-cache", false, "also empty the judge-call cache and the equivalence teacher transcripts: the next run pays for every call again")
	fs.BoolVar(&dryRun, "dry-run", false, "show what would go and change nothing")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func printPrune(w io.Writer, dir string, rep *localstate.PruneReport, before, after int64, blobsElsewhere bool) {
	fmt.Fprintf(w, "%d batches in %s (%s)\n", len(rep.Batches), dir, mib(before))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, b := range rep.Batches {
		fmt.Fprintf(tw, "  %s/%s\t%s\t%d jobs\t%s\n", b.Tenant, b.Batch, b.CreatedAt.Local().Format("2006-01-02 15:04"), b.Jobs, b.Why)
	}
	_ = tw.Flush()
	if rep.DryRun {
		fmt.Fprintf(w, "dry run: %d batches would go; nothing changed\n", rep.Pruned)
		return
	}
	fmt.Fprintf(w, "pruned %d batches: %d records, %d events, %d blobs (%s)", rep.Pruned, rep.Records, rep.Events, rep.Blobs, mib(rep.BlobBytes))
	if rep.CacheEntries > 0 {
		fmt.Fprintf(w, ", %d cache entries", rep.CacheEntries)
	}
	fmt.Fprintf(w, "; %s now holds %s\n", dir, mib(after))
	if blobsElsewhere {
		fmt.Fprintln(w, "blobs are kept in another store (--blob): none was removed")
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// dirBytes is the size of the files under dir, 0 when it cannot tell.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
