package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// MinTokenLength is the shortest token LoadTokens accepts: a token is the only thing
// between a team and another team's artifacts, so it must not be guessable.
const MinTokenLength = 16

// LoadTokens reads a tokens file, a JSON object {"<token>": "<tenant>"} where a tenant
// of "*" (AllTenants) sees every tenant. An empty path means no tokens: an open console.
func LoadTokens(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("console tokens: %w", err)
	}
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("console tokens %s: want a JSON object {\"<token>\": \"<tenant>\"}: %w", path, err)
	}
	if err := CheckTokens(m); err != nil {
		return nil, fmt.Errorf("console tokens %s: %w", path, err)
	}
	return m, nil
}

// CheckTokens validates a token map: long enough tokens, each mapping to a valid tenant
// name or AllTenants.
func CheckTokens(m map[string]string) error {
	for tok, tenant := range m {
		if len(tok) < MinTokenLength {
			return fmt.Errorf("a token of tenant %q is shorter than %d characters", tenant, MinTokenLength)
		}
		if strings.TrimSpace(tok) != tok {
			return fmt.Errorf("a token of tenant %q has surrounding spaces", tenant)
		}
		if tenant != AllTenants {
			if err := events.ValidateTenant(tenant); err != nil {
				return err
			}
		}
	}
	return nil
}

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
}

func (c caller) sees(tenant string) bool { return c.all || c.tenant == tenant }

type authenticator struct {
	// tokens maps sha256(token) to its tenant, so a lookup never compares the secret
	// itself byte by byte.
	tokens map[[32]byte]string
	key    []byte
}

func newAuthenticator(tokens map[string]string, key []byte) *authenticator {
	a := &authenticator{tokens: map[[32]byte]string{}, key: key}
	for tok, tenant := range tokens {
		a.tokens[sha256.Sum256([]byte(tok))] = tenant
	}
	return a
}

func (a *authenticator) open() bool { return len(a.tokens) == 0 }

// lookup resolves a presented token.
func (a *authenticator) lookup(tok string) (caller, bool) {
	if tok == "" {
		return caller{}, false
	}
	tenant, ok := a.tokens[sha256.Sum256([]byte(tok))]
	if !ok {
		return caller{}, false
	}
	if tenant == AllTenants {
		return caller{all: true, session: tok, name: "admin"}, true
	}
	return caller{tenant: tenant, session: tok, name: tenant}, true
}

// identify authenticates a request: a bearer header first, then the login cookie.
func (a *authenticator) identify(r *http.Request) (caller, bool) {
	if a.open() {
		return caller{all: true, name: "open-console"}, true
	}
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return caller{}, false
		}
		c, ok := a.lookup(strings.TrimSpace(tok))
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

// authed authenticates a request before h runs. An anonymous browser is sent to the
// login form; anything else anonymous gets 401.
func (s *server) authed(h handler) http.HandlerFunc {
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
		h(w, r, c)
	}
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
