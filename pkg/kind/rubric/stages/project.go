package stages

import (
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"
)

// projectOf records the feature's project for its views (rubricwire.Project): the
// project root and the adapter scripts it ships, as seed 004 lays them out. Every
// planned view carries the record, so that a gater can tell a project that ships no
// gates adapter from a submission that does not say.
func projectOf(featureDir, adapter string) (*rubricwire.Project, error) {
	p, err := argus.FindProject(featureDir, adapter)
	if err != nil {
		return nil, err
	}
	return &rubricwire.Project{Root: p.Root, Spec: p.Spec, Sense: p.Sense, Gates: p.Gates}, nil
}
