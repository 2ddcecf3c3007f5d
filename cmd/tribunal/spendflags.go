package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/pkg/spend"
)

// spendFlags say what a batch may spend on the provider (pkg/spend): which models it may
// name and how many judge calls one AC may make. They are flags and TRIBUNAL_* variables
// like every other setting, not a file: the judge, the renderer and the ingress each
// enforce them, and one variable in the configuration every process already reads
// (tribunal-config, .env) reaches all three with nothing to mount or keep in step.
//
// The defaults differ by who uses the command. A shared deployment's (serve, submit)
// allow only the judge's own model and DefaultMaxCallsPerAC calls per AC: a default that
// is unsafe on a shared deployment is not the default there. The all-in-one run's allow
// anything, as before: its one user spends its own key.
type spendFlags struct {
	registered bool
	models     []string
	tenants    []string
	maxCalls   int
}

func (s *spendFlags) register(fs *pflag.FlagSet, shared bool) {
	s.registered = true
	if shared {
		fs.StringSliceVar(&s.models, "allowed-models", nil, "models a team's batch may name (judges:, runner_model), comma separated; * allows any. Default none but the judge's own --judge-model, which an empty judges: uses")
		fs.IntVar(&s.maxCalls, "max-calls-per-ac", spend.DefaultMaxCallsPerAC, "judge calls one AC may make: its panel's models x orders (2 with positions swap or auto) x 2 with the repair re-ask (0: unlimited)")
	} else {
		fs.StringSliceVar(&s.models, "allowed-models", []string{spend.AnyModel}, "models the batch may name (judges:, runner_model), comma separated; * allows any (one user, its own key)")
		fs.IntVar(&s.maxCalls, "max-calls-per-ac", 0, "judge calls one AC may make: its panel's models x orders (2 with positions swap or auto) x 2 with the repair re-ask (0: unlimited)")
	}
	fs.StringSliceVar(&s.tenants, "tenant-models", nil, "a team's own models in place of --allowed-models, team=model[,model...]; repeatable, or one list: team-a=gpt-4o,gpt-4o-mini,team-b=llama3")
}

// policy is the rules the flags set; defaultModel is the judge's model when the caller
// knows it (always allowed: an empty judges: asks for it). Nil when the command has no
// such flags.
func (s *spendFlags) policy(defaultModel string) (*spend.Policy, error) {
	if !s.registered {
		return nil, nil
	}
	if s.maxCalls < 0 {
		return nil, fmt.Errorf("--max-calls-per-ac %d: want 0 (unlimited) or more", s.maxCalls)
	}
	tenants, err := spend.ParseTenantModels(s.tenants)
	if err != nil {
		return nil, fmt.Errorf("--tenant-models: %w", err)
	}
	p := &spend.Policy{Models: s.models, Tenants: tenants, Default: defaultModel, MaxCallsPerAC: s.maxCalls}
	if s.maxCalls == 0 {
		p.MaxCallsPerAC = -1
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("--allowed-models, --tenant-models: %w", err)
	}
	return p, nil
}

// allowance is what tenant may spend under the flags, for a submitter; nil without flags.
func (s *spendFlags) allowance(tenant, defaultModel string) (*spend.Allowance, error) {
	p, err := s.policy(defaultModel)
	if p == nil || err != nil {
		return nil, err
	}
	a := p.For(tenant)
	return &a, nil
}
