package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/blob"
)

// ReviewExport is what `tribunal review --export` writes: every queued item as a
// reviewer sees it, blind (ReviewItem), the images they show, and a skeleton answers
// file. The state folder, the services and the ingress build it with BlindReview and
// AddImages, so a team reviewing through any of them is shown the same thing.
type ReviewExport struct {
	Items []ReviewItem `json:"items"`
	// Images are the images the items show, by digest; empty in what the ingress answers
	// (each is fetched through its blob GET, scoped to the token's team: AddImages).
	Images map[string]ReviewExportImage `json:"images,omitempty"`
	Answer map[string]json.RawMessage   `json:"answers_template"`
	Note   string                       `json:"note"`
}

// ReviewExportImage is one image an export's items show.
type ReviewExportImage struct {
	MediaType string `json:"media_type"`
	Data      string `json:"data_base64"`
}

// BlindReview is the export of a review queue without its images: each entry's item
// (ReviewItemOf, read from store) and the answers template.
func BlindReview(ctx context.Context, store blob.Store, q []ReviewEntry) (*ReviewExport, error) {
	items := make([]ReviewItem, 0, len(q))
	for _, e := range q {
		it, err := ReviewItemOf(ctx, store, e)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return ExportOf(items), nil
}

// ExportOf is the export of review items read already (ReviewItemOf), without images:
// a page of the ingress's export is one.
func ExportOf(items []ReviewItem) *ReviewExport {
	ex := &ReviewExport{Items: []ReviewItem{}, Answer: map[string]json.RawMessage{}, Note: reviewExportNote}
	for _, it := range items {
		ex.Items = append(ex.Items, it)
		ex.Answer[it.Item] = json.RawMessage(it.Answer)
	}
	return ex
}

// Merge adds the items and answers template of another page of an export to ex.
func (ex *ReviewExport) Merge(p *ReviewExport) {
	if ex.Answer == nil {
		ex.Answer = map[string]json.RawMessage{}
	}
	ex.Items = append(ex.Items, p.Items...)
	for k, v := range p.Answer {
		ex.Answer[k] = v
	}
	if ex.Note == "" {
		ex.Note = p.Note
	}
}

const reviewExportNote = "answer each item in its answer_shape; import the answers with tribunal review --import"

// AddImages reads every image the export's items show from the tenant's blobs in store
// (ReviewImage: only what an item shows).
func (ex *ReviewExport) AddImages(ctx context.Context, store blob.Store, tenant string) error {
	if ex.Images == nil {
		ex.Images = map[string]ReviewExportImage{}
	}
	for _, it := range ex.Items {
		for _, p := range it.Shown {
			if p.Image == nil {
				continue
			}
			if _, ok := ex.Images[p.Image.SHA256]; ok {
				continue
			}
			data, mt, err := ReviewImage(ctx, store, tenant, it, p.Image.SHA256)
			if err != nil {
				return fmt.Errorf("%s: image %s: %w", it.Item, p.Image.SHA256, err)
			}
			ex.Images[p.Image.SHA256] = ReviewExportImage{MediaType: mt, Data: base64.StdEncoding.EncodeToString(data)}
		}
	}
	return nil
}
