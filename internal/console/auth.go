package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// caller is who a request comes from.
type caller struct {
	// tenant is the one tenant the caller sees, "" when all is set.
	tenant string
	all    bool
	// session is the credential the request authenticated with ("" in open mode): the
	// CSRF token is derived from it.
	session string
	// viaHeader says the credential came in an Authorization header, not a cookie.
	viaHeader bool
	// name identifies the caller in spot-check records.
	name string
	// role is the token's (tokens.RoleTeam for an operator's and in open mode): a
	// reviewer's opens only the routes that give it the right (routes).
	role tokens.Role
}

func (c caller) sees(tenant string) bool { return c.all || c.tenant == tenant }

// who is the caller as the pages' header names them.
func (c caller) who() string {
	if c.role == tokens.RoleReviewer {
		return c.name + " (reviewer)"
	}
	return c.name
}

type authenticator struct {
	tokens *tokens.Set
	key    []byte
}

func newAuthenticator(m map[string]string, key []byte) *authenticator {
	return &authenticator{tokens: tokens.NewSet(m), key: key}
}

func (a *authenticator) open() bool { return a.tokens.Len() == 0 }

// lookup resolves a presented token, whatever its role: what the role may open is the
// route's to say (authed).
func (a *authenticator) lookup(tok string) (caller, bool) {
	h, ok := a.tokens.Holder(tok)
	if !ok {
		return caller{}, false
	}
	if h.Tenant == AllTenants {
		return caller{all: true, session: tok, name: "admin", role: tokens.RoleTeam}, true
	}
	return caller{tenant: h.Tenant, session: tok, name: h.Tenant, role: h.Role}, true
}

// identify authenticates a request: a bearer header first, then the login cookie.
func (a *authenticator) identify(r *http.Request) (caller, bool) {
	if a.open() {
		return caller{all: true, name: "open-console", role: tokens.RoleTeam}, true
	}
	if tok, present, ok := tokens.Bearer(r); present {
		if !ok {
			return caller{}, false
		}
		c, ok := a.lookup(tok)
		c.viaHeader = ok
		return c, ok
	}
	if ck, err := r.Cookie(CookieName); err == nil {
		return a.lookup(ck.Value)
	}
	return caller{}, false
}

// csrf is the form token of a session: an HMAC of its credential under a key that
// never leaves the process, so a page of another origin can neither read nor forge it.
func (a *authenticator) csrf(c caller) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte("tribunal-console-csrf\x00" + c.session))
	return hex.EncodeToString(m.Sum(nil))
}

func (a *authenticator) checkCSRF(c caller, got string) bool {
	want := a.csrf(c)
	return hmac.Equal([]byte(want), []byte(got))
}

// sameOrigin reports whether a state-changing request comes from one of the console's
// own pages: the Origin header (every current browser sends it on POST), else
// Sec-Fetch-Site, else the Referer must name this host. A request that carries none of
// them is refused: nothing vouches for where it came from.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && o != "null" && u.Host == r.Host
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin":
		return true
	case "":
	default:
		return false
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		return err == nil && u.Host == r.Host
	}
	return false
}

type handler func(http.ResponseWriter, *http.Request, caller)

// authed authenticates a request before h runs, and refuses a caller whose role is not
// one of roles (the route's, routes). An anonymous browser is sent to the login form;
// anything else anonymous gets 401.
func (s *server) authed(roles []tokens.Role, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.auth.identify(r)
		if !ok {
			if r.Method == http.MethodGet && r.Header.Get("Authorization") == "" && !isAPI(r) {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="tribunal console"`)
			s.errorPage(w, r, http.StatusUnauthorized, "Sign in", "This console needs a token.")
			return
		}
		if !slices.Contains(roles, c.role) {
			s.refuseRole(w, r, c)
			return
		}
		h(w, r, c)
	}
}

// refuseRole answers a caller whose role may not use the route. A path naming another
// team (or no valid one) is the 404 of a batch nobody submitted, as every page answers
// it, so a refusal never says that another team's batch exists; the caller's own team's
// is a 403 naming the role and what it may open.
func (s *server) refuseRole(w http.ResponseWriter, r *http.Request, c caller) {
	if t := r.PathValue("tenant"); t != "" && (events.ValidateTenant(t) != nil || !c.sees(t)) {
		s.notFound(w, r)
		return
	}
	s.log.Info("refused: role", "role", c.role, "tenant", c.tenant, "route", r.Pattern)
	msg := fmt.Sprintf("A %s's token of %s may not open %s: it may only open %s (docs/security.md).", c.role, c.tenant, r.Pattern, roleMay(c.role))
	if isAPI(r) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg, "role": string(c.role)})
		return
	}
	s.errorPage(w, r, http.StatusForbidden, "Not for a "+string(c.role), msg)
}

type loginPage struct {
	Next  string
	Error string
}

// safeNext keeps a post-login redirect on this console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

func (s *server) loginForm(w http.ResponseWriter, r *http.Request) {
	if s.auth.open() {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "login.html", view{Title: "Sign in", Page: loginPage{Next: safeNext(r.URL.Query().Get("next"))}})
}

func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if s.auth.open() {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if !sameOrigin(r) {
		s.errorPage(w, r, http.StatusForbidden, "Refused", "Sign in from the console's own login page.")
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	if _, ok := s.auth.lookup(tok); !ok {
		s.render(w, r, http.StatusUnauthorized, "login.html", view{Title: "Sign in", Page: loginPage{Next: next, Error: "Unknown token."}})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok, Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		s.errorPage(w, r, http.StatusForbidden, "Refused", "Sign out from the console's own pages.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
