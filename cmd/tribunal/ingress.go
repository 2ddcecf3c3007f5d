package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// ingressFlags let a team reach tribunal through the ingress with nothing but its token.
type ingressFlags struct {
	url       string
	token     string
	tokenFile string
}

func (f *ingressFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "ingress", "", "team access: the ingress URL (https://tribunal.example.com); then only a team token is needed, no NATS or blob-store credentials")
	fs.StringVar(&f.token, "token", "", "with --ingress: the team's bearer token, or one of its reviewers' (prefer --token-file or the variable: a command line is visible to other users)")
	fs.StringVar(&f.tokenFile, "token-file", "", "with --ingress: a file holding the team's bearer token, or one of its reviewers'")
}

// dial connects to the ingress, nil without --ingress.
func (f *ingressFlags) dial(ctx context.Context) (*ingress.Client, error) {
	if f.url == "" {
		return nil, nil
	}
	tok := f.token
	if f.tokenFile != "" {
		if tok != "" {
			return nil, exitError{2, errors.New("give --token or --token-file, not both")}
		}
		data, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, exitError{2, fmt.Errorf("token file: %w", err)}
		}
		tok = strings.TrimSpace(string(data))
	}
	c, err := ingress.Dial(ctx, f.url, tok, nil)
	var e *ingress.Error
	if errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden) {
		return nil, exitError{2, err}
	}
	return c, err
}

// dialAs dials the ingress (nil without --ingress) for a command whose --tenant, when
// given, must be the token's (ingressTenant).
func (f *ingressFlags) dialAs(cmd *cobra.Command, tenant string) (*ingress.Client, error) {
	c, err := f.dial(cmd.Context())
	if c == nil || err != nil {
		return nil, err
	}
	if _, err := ingressTenant(cmd, c, tenant); err != nil {
		return nil, err
	}
	return c, nil
}

// ingressTenant is the tenant of an ingress client: the token's. An explicit --tenant
// naming another tenant is a mistake worth stopping for, not something to override.
func ingressTenant(cmd *cobra.Command, c *ingress.Client, tenant string) (string, error) {
	if cmd.Flags().Changed("tenant") && tenant != c.Tenant() {
		return "", exitError{2, fmt.Errorf("--tenant %s: the ingress token is tenant %s's", tenant, c.Tenant())}
	}
	return c.Tenant(), nil
}

// serveIngress runs the ingress until ctx ends: teams' only door, holding the services'
// NATS user and blob credentials (conn) and the teams' tokens (tokensFile), refusing what
// a team may not spend (jf.spend; the judge's --judge-model is always allowed). Like the
// services it serves /healthz, /readyz and /metrics on health; it takes requests once the
// services' buckets exist.
func serveIngress(ctx context.Context, conn *connFlags, jf *judgeFlags, qf *quotaFlags, addr, tokensFile, health string) error {
	teamTokens, err := tokens.Load(tokensFile)
	if err != nil {
		return exitError{2, err}
	}
	quotas, err := qf.quotas()
	if err != nil {
		return exitError{2, err}
	}
	policy, err := jf.spend.policy(jf.model)
	if err != nil {
		return exitError{2, err}
	}
	teams := 0
	for _, t := range teamTokens {
		if t != tokens.AllTenants {
			teams++
		}
	}
	if teams == 0 {
		return exitError{2, errors.New("ingress: no team tokens: give --tokens a JSON file {\"<token>\": \"<team>\"} (tribunal tenants writes one)")}
	}
	nc, store, done, err := conn.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := checkQuotaStore(quotas, store); err != nil {
		return exitError{2, err}
	}
	env, err := newClientEnv(nc, store)
	if err != nil {
		return err
	}
	var serving atomic.Bool
	ready := func() error {
		if !nc.IsConnected() {
			return fmt.Errorf("nats: %s", nc.Status())
		}
		return bucketsReady(serving.Load())
	}
	haddr, stopHealth, err := serveHealth(health, ready)
	if err != nil {
		return err
	}
	defer stopHealth()
	b, err := console.WaitForBuckets(ctx, env.js, time.Second, slog.Default())
	if err != nil {
		return nil // stopped before the services came up
	}
	h := ingress.New(ingress.Config{Tokens: teamTokens, Pub: bus.NewPublisher(env.js, bus.ComparePayloads()), Store: store, Buckets: b, MaxArtifactBytes: blob.ArtifactMaxSize, Spend: *policy, Quotas: quotas, Replicas: conn.replicas})
	// A 20 MiB artifact over a slow link needs longer than the console's read timeout.
	bound, wait, err := startHTTP(ctx, "ingress", addr, h, 5*time.Minute)
	if err != nil {
		return err
	}
	serving.Store(true)
	slog.Info("ingress serving", "url", "http://"+bound, "health", haddr, "teams", teams, "allowed_models", policy.Models, "judge_model", policy.Default, "tenant_models", len(policy.Tenants), "max_calls_per_ac", policy.MaxCallsPerAC,
		"tenant_max_stored", quotas.Default.Stored, "tenant_max_batches", quotas.Default.Batches, "tenant_max_acs", quotas.Default.ACs, "tenant_quotas", len(quotas.Tenants))
	<-ctx.Done()
	wait()
	return nil
}
