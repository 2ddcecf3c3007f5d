package stage

import (
	"context"
	"errors"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// Ingest returns a submitted source as a rendered artifact, or a blocked reason when the
// artifact is at fault (missing, unreadable, unsupported, a diff), or an error when the
// infrastructure is (a storage outage is retried, never blamed on the AC). Every kind that
// judges files ingests them by these same rules.
func Ingest(ctx context.Context, env *RenderEnv, tenant string, src events.Source) (events.Artifact, string, error) {
	switch {
	case src.Error != "":
		return events.Artifact{}, src.Error, nil
	case src.Blob != nil:
		ref := blob.Ref{Tenant: tenant, SHA256: src.Blob.SHA256}
		data, attrs, err := blob.ReadAll(ctx, env.Store, ref)
		if errors.Is(err, blob.ErrNotFound) {
			return events.Artifact{}, artifact.ReasonNotStored, nil
		}
		if errors.Is(err, blob.ErrDigestMismatch) {
			return events.Artifact{}, artifact.ReasonStoredBad, nil
		}
		if err != nil {
			return events.Artifact{}, "", err
		}
		r := artifact.Classify(src.Name, data, attrs.MediaType)
		if r.Blocked != "" {
			return events.Artifact{}, r.Blocked, nil
		}
		return events.Artifact{Blob: events.Blob{SHA256: ref.SHA256, MediaType: r.MediaType, Size: attrs.Size}, Class: r.Class}, "", nil
	case src.URL != "":
		if env.Fetcher == nil {
			return events.Artifact{}, "remote artifact: this renderer fetches no URLs", nil
		}
		f, err := env.Fetcher.Fetch(ctx, src.URL)
		if err != nil {
			return events.Artifact{}, "", err
		}
		if f.Blocked != "" {
			return events.Artifact{}, f.Blocked, nil
		}
		attrs, err := blob.PutBytes(ctx, env.Store, tenant, f.Data, f.MediaType)
		if err != nil {
			return events.Artifact{}, "", fmt.Errorf("store fetched %s: %w", src.URL, err)
		}
		return events.Artifact{Blob: events.Blob{SHA256: attrs.Ref.SHA256, MediaType: f.MediaType, Size: attrs.Size}, Class: f.Class}, "", nil
	}
	return events.Artifact{}, artifact.CauseMissing, nil
}
