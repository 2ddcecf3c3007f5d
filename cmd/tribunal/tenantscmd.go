package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

func newTenantsCmd() *cobra.Command {
	var out, creds, tokensOut, stream, keda, kedaNamespace, kedaAccount string
	var kedaLag int
	var reviewers []string
	cmd := &cobra.Command{
		Use:   "tenants <team> [team...]",
		Short: "Write the NATS authorization of the services and the teams' ingress tokens",
		Long: `tenants writes what a tribunal shared by several teams runs with (docs/security.md):

  --out          a nats-server configuration block with the services' users, each with the
                 least it needs: a service publishes only the events it produces and its
                 dead letters, consumes only its own durables and touches only its own
                 buckets; the ingress user publishes only the events a team originates
                 (job.submitted, spotcheck.recorded). Teams get no NATS user at all.
  --credentials  every user's password in clear (mode 0600), for the services' and the
                 ingress's TRIBUNAL_NATS_PASSWORD; the config holds only bcrypt hashes.
  --tokens       the tokens file of the ingress (and console): one bearer token per team,
                 the only credential a team holds.
  --reviewer     TEAM[=FILE] issues one more reviewer's token of TEAM ("<team>:reviewer" in
                 the tokens file), and with FILE writes it there too (mode 0600) to hand to
                 the person: it lists and answers the team's blind review queue and reads
                 nothing else, no results, no gold set, no submission (docs/security.md).

Re-running with the same files keeps existing passwords and tokens, reviewers' too; a team
left out loses its tokens. The services then run with --tenants (TRIBUNAL_TENANTS) listing the same teams,
and the judges consume one durable per team. --keda writes the kustomize patch that makes
KEDA scale the judges on all of those consumers (deploy/k8s/keda-judge.yaml has a single
trigger on the shared one); regenerate it whenever the list changes.`,
		Example: `  tribunal tenants team-a team-b --out auth.conf --credentials credentials.json --tokens tokens.json
  tribunal tenants team-a team-b --tokens tokens.json --reviewer team-a=alice.token
  tribunal serve nats --config auth.conf --listen 0.0.0.0:4222
  TRIBUNAL_NATS_PASSWORD=... tribunal serve judge --nats-user tribunal-judge --tenants team-a,team-b
  TRIBUNAL_NATS_PASSWORD=... tribunal serve ingress --nats-user tribunal-ingress --tokens tokens.json
  # team-a, given its token from tokens.json:
  tribunal submit batch.yaml --ingress https://tribunal.example.com --token-file team-a.token`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := tenants.Options{Passwords: map[string]string{}, Stream: stream}
			var reviewerFiles []string
			for _, r := range reviewers {
				team, file, _ := strings.Cut(r, "=")
				opts.Reviewers = append(opts.Reviewers, team)
				reviewerFiles = append(reviewerFiles, file)
			}
			if data, err := os.ReadFile(creds); err == nil {
				var list []tenants.Credential
				if err := json.Unmarshal(data, &list); err != nil {
					return exitError{2, fmt.Errorf("credentials %s: %w", creds, err)}
				}
				for _, c := range list {
					opts.Passwords[c.User] = c.Password
				}
			}
			if _, err := os.Stat(tokensOut); err == nil {
				existing, err := tokens.Load(tokensOut)
				if err != nil {
					return exitError{2, err}
				}
				opts.Tokens = existing
			}
			g, err := tenants.Generate(args, opts)
			if err != nil {
				return exitError{2, err}
			}
			if err := os.WriteFile(out, []byte(g.Config), 0o600); err != nil {
				return err
			}
			data, _ := json.MarshalIndent(g.Credentials, "", "  ")
			if err := os.WriteFile(creds, append(data, '\n'), 0o600); err != nil {
				return err
			}
			data, _ = json.MarshalIndent(g.Tokens, "", "  ")
			if err := os.WriteFile(tokensOut, append(data, '\n'), 0o600); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d users), %s and %s (%d teams)\nstart NATS with it: tribunal serve nats --config %s\n",
				out, len(g.Credentials), creds, tokensOut, len(args), out)
			for i, tok := range g.NewReviewers {
				team := opts.Reviewers[i]
				where := tokensOut + ` under "` + tokens.ReviewerOf(team) + `"`
				if f := reviewerFiles[i]; f != "" {
					if err := os.WriteFile(f, []byte(tok+"\n"), 0o600); err != nil {
						return err
					}
					where = f
				}
				fmt.Fprintf(cmd.OutOrStdout(), "issued a reviewer's token of %s (%s): its reviews are by %s\n", team, where, ingress.Reviewer(team, tok))
			}
			if keda != "" {
				patch, err := tenants.KEDAPatch(args, tenants.KEDAOptions{Namespace: kedaNamespace, Account: kedaAccount, LagThreshold: kedaLag})
				if err != nil {
					return exitError{2, err}
				}
				if err := os.WriteFile(keda, []byte(patch), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: one KEDA trigger per team's judge consumer (a patch over deploy/k8s)\n", keda)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "auth.conf", "nats-server configuration file to write")
	cmd.Flags().StringVar(&creds, "credentials", "credentials.json", "file the NATS users' passwords are written to (mode 0600)")
	cmd.Flags().StringVar(&tokensOut, "tokens", "tokens.json", "tokens file of the ingress and the console, one token per team, written with mode 0600 (an existing file's tokens are kept)")
	cmd.Flags().StringArrayVar(&reviewers, "reviewer", nil, "TEAM[=FILE]: issue one more reviewer's token of TEAM (review queue only), written to the tokens file and to FILE (mode 0600); repeat for more people")
	cmd.Flags().StringVar(&stream, "stream", "TRIBUNAL", "JetStream stream name the services use")
	cmd.Flags().StringVar(&keda, "keda", "", "also write the kustomize patch of the judge ScaledObject with one trigger per team consumer (KEDA 2.12+)")
	cmd.Flags().StringVar(&kedaNamespace, "keda-namespace", "tribunal", "with --keda: the namespace tribunal runs in (NATS monitoring at nats.<namespace>.svc.cluster.local:8222)")
	cmd.Flags().StringVar(&kedaAccount, "keda-account", tenants.Account, "with --keda: the NATS account of the stream (the generated authorization's; \"$G\" for a server without accounts)")
	cmd.Flags().IntVar(&kedaLag, "keda-lag-threshold", 32, "with --keda: backlog per judge replica KEDA aims at")
	return cmd
}
