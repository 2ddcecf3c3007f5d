package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/tenants"
)

func newTenantsCmd() *cobra.Command {
	var out, creds string
	cmd := &cobra.Command{
		Use:   "tenants <team> [team...]",
		Short: "Write the NATS authorization that isolates teams sharing one tribunal",
		Long: `tenants writes a nats-server configuration block with one user per team and one for the
services. A team may publish only its own ingress subjects (tribunal.<team>.job.submitted,
tribunal.<team>.render.requested) and read only its own subjects and its own reply inbox;
it gets no JetStream API rights, so it cannot create a consumer on the shared stream and
read other teams' events. Passwords are stored as bcrypt hashes in the config and written in
clear to the credentials file (mode 0600); re-running with the same credentials file keeps
existing passwords.`,
		Example: `  tribunal tenants team-a team-b --out auth.conf --credentials credentials.json
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
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "auth.conf", "nats-server configuration file to write")
	cmd.Flags().StringVar(&creds, "credentials", "credentials.json", "file the users' passwords are written to (mode 0600)")
	return cmd
}
