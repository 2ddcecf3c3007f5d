package kind

import "github.com/tribunal-dev/tribunal/pkg/events"

// Describing is a kind that names some of its events for a reader, the audit's report
// among them: DescribeRender names a render request of spec, "" for a plain one
// (rubric's "confirmation render", which re-renders a pass without an edit).
type Describing interface {
	DescribeRender(spec events.JobSpec) string
}

// RenderName is how a reader names a render request of spec: its kind's name for it
// (Describing), else "render request".
func RenderName(spec events.JobSpec) string {
	if k, err := Lookup(spec.Kind); err == nil {
		if d, ok := k.(Describing); ok {
			if name := d.DescribeRender(spec); name != "" {
				return name
			}
		}
	}
	return "render request"
}
