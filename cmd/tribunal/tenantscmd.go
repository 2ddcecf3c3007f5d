package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/tenants"
)

func newTenantsCmd() *cobra.Command {
	var out, creds, keda, kedaNamespace, kedaAccount string
	var kedaLag int
	cmd := &cobra.Command{
		Use:   "tenants <team> [team...]",
		Short: "Write the NATS authorization that isolates teams sharing one tribunal",
		Long: `tenants writes a nats-server configuration block with one user per team and one for the
services. A team may publish only its own ingress subjects (tribunal.<team>.job.submitted,
tribunal.<team>.render.requested) and read only its own subjects and its own reply inbox;
it gets no JetStream API rights, so it cannot create a consumer on the shared stream and
read other teams' events. Passwords are stored as bcrypt hashes in the config and written in
clear to the credentials file (mode 0600); re-running with the same credentials file keeps
existing passwords.

The services then run with --tenants (TRIBUNAL_TENANTS) listing the same teams, and the
judges consume one durable per team. --keda writes the kustomize patch that makes KEDA
scale the judges on all of those consumers (deploy/k8s/keda-judge.yaml has a single
trigger on the shared one); regenerate it whenever the list changes.`,
		Example: `  tribunal tenants team-a team-b --out auth.conf --credentials credentials.json --keda keda-tenants.yaml
  tribunal serve nats --config auth.conf --listen 0.0.0.0:4222
  TRIBUNAL_NATS_PASSWORD=... tribunal submit batch.yaml --nats-user team-a --tenant team-a`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			existing := map[string]string{}
			if data, err := os.ReadFile(creds); err == nil {
				var list []tenants.Credential
				if err := json.Unmarshal(data, &list); err != nil {
					return exitError{2, fmt.Errorf("credentials %s: %w", creds, err)}
				}
				for _, c := range list {
					existing[c.User] = c.Password
				}
			}
			g, err := tenants.Generate(args, existing)
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
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d users) and %s\nstart NATS with it: tribunal serve nats --config %s\n", out, len(g.Credentials), creds, out)
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
	cmd.Flags().StringVar(&creds, "credentials", "credentials.json", "file the users' passwords are written to (mode 0600)")
	cmd.Flags().StringVar(&keda, "keda", "", "also write the kustomize patch of the judge ScaledObject with one trigger per team consumer (KEDA 2.12+)")
	cmd.Flags().StringVar(&kedaNamespace, "keda-namespace", "tribunal", "with --keda: the namespace tribunal runs in (NATS monitoring at nats.<namespace>.svc.cluster.local:8222)")
	cmd.Flags().StringVar(&kedaAccount, "keda-account", tenants.Account, "with --keda: the NATS account of the stream (the generated authorization's; \"$G\" for a server without accounts)")
	cmd.Flags().IntVar(&kedaLag, "keda-lag-threshold", 32, "with --keda: backlog per judge replica KEDA aims at")
	return cmd
}
