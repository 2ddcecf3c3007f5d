package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// exportView writes the static site `tribunal view --export` makes: it opens the state
// folder as a reader does (waiting while a run holds it), exports the batches asked for
// (every batch by default) and says where the site opens.
func exportView(ctx context.Context, f *viewFlags) error {
	lock, err := lockState(ctx, f.dataDir, "view --export", true)
	if err != nil {
		return err
	}
	defer lock.Release()
	env, err := openState(ctx, f.dataDir, f.blobURL)
	if err != nil {
		return exitError{2, err}
	}
	defer env.Close()
	b := env.Running.Buckets
	var batches []console.ExportBatch
	ids := splitList(f.batches)
	if len(ids) == 0 {
		all, err := client.ListBatches(ctx, b)
		if err != nil {
			return err
		}
		for _, h := range all {
			batches = append(batches, console.ExportBatch{Tenant: h.Tenant, Batch: h.Batch})
		}
	}
	for _, id := range ids {
		if err := events.ValidateName(id); err != nil {
			return exitError{2, fmt.Errorf("--batch %q: %w", id, err)}
		}
		tenant, err := client.ResolveTenant(ctx, b, "", id)
		if err != nil {
			return exitError{2, err}
		}
		batches = append(batches, console.ExportBatch{Tenant: tenant, Batch: id})
	}
	if len(batches) == 0 {
		return exitError{2, fmt.Errorf("no batch to export in %s", f.dataDir)}
	}
	if err := os.MkdirAll(f.export, 0o755); err != nil {
		return exitError{2, fmt.Errorf("--export: %w", err)}
	}
	cfg := console.Config{Buckets: b, Store: env.Store, Logger: slog.Default(),
		Audit: auditHook(env.Running.JS, b, env.Store, ""), Report: reportHook(env.Running.JS, b, "")}
	out, err := console.Export(ctx, cfg, f.export, batches)
	if err != nil {
		return err
	}
	what := "1 batch"
	if len(batches) != 1 {
		what = fmt.Sprintf("%d batches", len(batches))
	}
	fmt.Printf("exported %s (%d pages, %d artifacts, %.1f MiB) to %s: open %s\n", what, out.Pages, out.Artifacts,
		float64(out.Bytes)/(1<<20), f.export, filepath.Join(f.export, filepath.FromSlash(out.Index)))
	return nil
}
