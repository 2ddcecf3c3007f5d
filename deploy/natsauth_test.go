package deploy

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
)

var updateNATSAuth = flag.Bool("update-nats-auth", false, "rewrite deploy/compose/nats-auth.conf from pkg/tenants")

// composeNATSAuth is the authorization docker-compose.yml's NATS runs with.
const composeNATSAuth = "deploy/compose/nats-auth.conf"

// composeNATSUsers are the NATS users of the compose deployment: one per service, the
// console's, the ingress's and the operators' (commands from the host).
func composeNATSUsers() map[string]string {
	users := map[string]string{"console": tenants.ConsoleUser, "ingress": tenants.IngressUser}
	for _, svc := range bus.Services {
		users[svc] = tenants.ServiceUser(svc)
	}
	return users
}

func composeNATSUserList() []string {
	list := []string{tenants.OperatorUser}
	for _, svc := range bus.Services {
		list = append(list, tenants.ServiceUser(svc))
	}
	return append(list, tenants.IngressUser, tenants.ConsoleUser)
}

// TestComposeNATSAuthorization: docker-compose.yml's NATS admits only the generated
// users, each with the least it needs: its -c names deploy/compose/nats-auth.conf, which
// is pkg/tenants' authorization as it stands (EnvConfig, rewritten with
// -update-nats-auth), every password a variable the server gets from .env; every
// tribunal service connects as its own user with the same variable's value; and so do
// the three members of the cluster shape.
func TestComposeNATSAuthorization(t *testing.T) {
	want, err := tenants.EnvConfig(composeNATSUserList(), "")
	if err != nil {
		t.Fatal(err)
	}
	if *updateNATSAuth {
		if err := os.WriteFile(filepath.Join(repo, composeNATSAuth), []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := string(read(t, composeNATSAuth)); got != want {
		t.Fatalf("%s is not pkg/tenants' authorization any more: go test ./deploy -run TestComposeNATSAuthorization -update-nats-auth", composeNATSAuth)
	}
	env := envExample(t)
	base, err := LoadCompose("docker-compose.yml", read(t, "docker-compose.yml"), env, repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := LoadComposeFiles(clusterComposeFiles(t), env, repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for shape, project := range map[string]*types.Project{"docker-compose.yml": base, "with docker-compose.cluster.yml": cluster} {
		cfg, ok := project.Configs["nats-auth"]
		if !ok || filepath.Clean(cfg.File) != filepath.Join(repoRoot(t), composeNATSAuth) {
			t.Fatalf("%s: config nats-auth is %+v, want the file %s", shape, cfg, composeNATSAuth)
		}
		members := 0
		for name, svc := range project.Services {
			if !strings.HasPrefix(svc.Image, "nats:") {
				continue
			}
			members++
			target, _ := natsFlag(svc.Command, "c", "config")
			mounted := false
			for _, c := range svc.Configs {
				mounted = mounted || (c.Source == "nats-auth" && c.Target == target)
			}
			if target == "" || !mounted {
				t.Errorf("%s: service %s runs without the authorization (-c %q, configs %+v)", shape, name, target, svc.Configs)
			}
			for _, u := range composeNATSUserList() {
				if v := svc.Environment[tenants.PasswordEnv(u)]; v == nil || *v == "" {
					t.Errorf("%s: service %s lacks %s, the password of %s", shape, name, tenants.PasswordEnv(u), u)
				}
			}
		}
		if members == 0 {
			t.Errorf("%s: no NATS service", shape)
		}
		nats := project.Services["nats"]
		for svcName, user := range composeNATSUsers() {
			svc, ok := project.Services[svcName]
			if !ok {
				t.Errorf("%s: no service %s", shape, svcName)
				continue
			}
			u, pw := svc.Environment["TRIBUNAL_NATS_USER"], svc.Environment["TRIBUNAL_NATS_PASSWORD"]
			server := nats.Environment[tenants.PasswordEnv(user)]
			if u == nil || *u != user || pw == nil || server == nil || *pw != *server {
				t.Errorf("%s: service %s connects as %v, want %s with %s", shape, svcName, u, user, tenants.PasswordEnv(user))
			}
		}
	}
}
