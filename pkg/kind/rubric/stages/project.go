package stages

import (
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

// projectOf records the feature's project for its views (events.RubricProject): the
// project root and the adapter scripts it ships, as seed 004 lays them out. Every
// planned view carries the record, so that a gater can tell a project that ships no
// gates adapter from a submission that does not say.
func projectOf(featureDir, adapter string) (*events.RubricProject, error) {
	p, err := argus.FindProject(featureDir, adapter)
	if err != nil {
		return nil, err
	}
	return &events.RubricProject{Root: p.Root, Spec: p.Spec, Sense: p.Sense, Gates: p.Gates}, nil
}
