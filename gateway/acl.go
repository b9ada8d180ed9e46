package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/internal/ratelog"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Users and their permissions, as Redis's ACL users (docs/SECURITY.md):
// `AUTH user password` (or HELLO 3 AUTH user password) logs a connection in
// as one of ServerOptions.Users; `AUTH password` as the "default" user,
// whose password is ServerOptions.Password and who may do everything. A
// user may read, or read and write, the namespaces its access map names
// ("*" for all). Every request is checked where it leaves the gateway
// (submitGroup, and SYNOD MEMBER): an operation that changes state
// (Service.IsRead false) needs read-write, anything else read-only; a
// refusal is Redis's NOPERM error. Passwords are stored as PBKDF2 hashes
// (package certs); after one successful check a user's hash is remembered in
// memory as a salted SHA-256, so that reconnecting clients do not pay the
// PBKDF2 cost each time, while a wrong password always does.

// aclUser is one compiled user.
type aclUser struct {
	name   string
	hash   certs.PasswordHash
	all    string            // access to every namespace ("" none)
	access map[string]string // per namespace, overriding all

	mu   sync.Mutex
	fast []byte // sha256(salt|password) after a successful check
}

// acl holds the server's users.
type acl struct {
	users   map[string]*aclUser
	limOnce sync.Once
	lim     *ratelog.Limiter // refusals, logged once per kind and host (limiter)
	svcMu   sync.Mutex
	svcs    map[string]service.Service // namespace -> service, for IsRead
}

func newACL(users []config.User) (*acl, error) {
	a := &acl{users: map[string]*aclUser{}}
	for i, u := range users {
		h, err := certs.ParsePasswordHash(u.Password)
		if err != nil {
			return nil, fmt.Errorf("users[%d].password: %w", i, err)
		}
		au := &aclUser{name: u.Name, hash: h, access: map[string]string{}}
		for ns, lvl := range u.Access {
			if ns == "*" {
				au.all = lvl
			} else {
				au.access[ns] = lvl
			}
		}
		a.users[u.Name] = au
	}
	return a, nil
}

func (u *aclUser) check(pass string) bool {
	sum := sha256.Sum256(append(append([]byte{}, u.hash.Salt...), pass...))
	u.mu.Lock()
	fast := u.fast
	u.mu.Unlock()
	if fast != nil {
		return subtle.ConstantTimeCompare(fast, sum[:]) == 1
	}
	if !u.hash.Verify(pass) {
		return false
	}
	u.mu.Lock()
	u.fast = sum[:]
	u.mu.Unlock()
	return true
}

// refused logs a refusal at most once per ten seconds for its kind and
// remote host (package ratelog).
func (a *acl) refused(log *slog.Logger, kind, remote, msg string, attrs ...any) {
	a.limOnce.Do(func() { a.lim = ratelog.New(0) })
	a.lim.Log(log, slog.LevelWarn, kind, remote, msg, attrs...)
}

// level is u's access to namespace ns: "", config.ReadOnly or config.ReadWrite.
func (u *aclUser) level(ns string) string {
	if l, ok := u.access[ns]; ok {
		return l
	}
	return u.all
}

const wrongPass = "WRONGPASS invalid username-password pair or user is disabled."

// authenticate logs c in as user with pass and returns "" or the error reply.
func (c *conn) authenticate(user, pass string) string {
	s := c.s
	if user == "default" {
		if s.opts.Password == "" {
			return "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
		}
		if subtle.ConstantTimeCompare([]byte(pass), []byte(s.opts.Password)) != 1 {
			s.acl.refused(s.log, "auth", c.nc.RemoteAddr().String(), "authentication failed", "id", c.id, "user", user)
			c.logRefusal("auth", "AUTH", user)
			return wrongPass
		}
		c.mu.Lock() // c.user is read by CLIENT KILL USER (clientkill.go)
		c.authed, c.user = true, nil
		c.mu.Unlock()
		return ""
	}
	u, ok := s.acl.users[user]
	if !ok || !u.check(pass) {
		s.acl.refused(s.log, "auth", c.nc.RemoteAddr().String(), "authentication failed", "id", c.id, "user", user)
		c.logRefusal("auth", "AUTH", user)
		return wrongPass
	}
	c.mu.Lock() // c.user is read by CLIENT KILL USER (clientkill.go)
	c.authed, c.user = true, u
	c.mu.Unlock()
	return ""
}

// permit returns "" when c's user may submit req to namespace ns, else the
// NOPERM error reply.
func (c *conn) permit(ns string, req automaton.Request) string {
	if c.user == nil {
		return ""
	}
	c.mu.Lock()
	cmd := c.lastCmd
	c.mu.Unlock()
	msg := c.s.acl.permit(c.s.b, c.user, ns, req, cmd)
	if msg != "" {
		c.s.acl.refused(c.s.log, "noperm", c.nc.RemoteAddr().String(), "request refused", "id", c.id, "user", c.user.name, "namespace", ns, "reason", msg)
		c.logRefusal("command", cmd, c.user.name)
	}
	return msg
}

// permit returns "" when user u may submit req (command cmd) to namespace
// ns, else the NOPERM error.
func (a *acl) permit(b Backend, u *aclUser, ns string, req automaton.Request, cmd string) string {
	switch u.level(ns) {
	case config.ReadWrite:
		return ""
	case config.ReadOnly:
		if !a.writes(b, ns, req) {
			return ""
		}
		return synoderr.New(synoderr.NoPerm, fmt.Sprintf("User %s has no permissions to run the '%s' command", u.name, cmd)).Error()
	}
	return synoderr.New(synoderr.NoPerm, fmt.Sprintf("User %s has no permissions to access the '%s' namespace", u.name, ns)).Error()
}

// writes reports whether req may change namespace ns's state.
func (a *acl) writes(b Backend, ns string, req automaton.Request) bool {
	svc := a.service(b, ns)
	if svc == nil {
		return true
	}
	if len(req.Ops) > 0 {
		for _, op := range req.Ops {
			if !svc.IsRead(op) {
				return true
			}
		}
		return false
	}
	if req.Txn != nil && req.Op.Kind == "" {
		return false // begin, commit or abort: the writes were checked as they came
	}
	return !svc.IsRead(req.Op)
}

func (a *acl) service(b Backend, ns string) service.Service {
	a.svcMu.Lock()
	defer a.svcMu.Unlock()
	if a.svcs == nil {
		a.svcs = map[string]service.Service{}
		for _, n := range b.Namespaces() {
			if svc, err := service.Lookup(n.Service); err == nil {
				a.svcs[n.Name] = svc
			}
		}
	}
	return a.svcs[ns]
}

// Users is the user store and its checks for a client port other than the
// Redis protocol's: the gRPC API (package gateway/grpcserver) builds one from
// the same cluster file fields (password, users) and applies the same checks
// as a RESP connection, so that a user has the same rights on both ports.
type Users struct {
	b        Backend
	password string
	required bool
	a        *acl
}

// User is a logged-in user of a Users store; the default user (the
// password's) may do everything.
type User struct {
	u *aclUser // nil: the default user
}

// Name is the user's name ("default" for the password's user).
func (u *User) Name() string {
	if u == nil || u.u == nil {
		return "default"
	}
	return u.u.name
}

// NewUsers compiles the cluster file's password and users for backend b
// (whose namespaces' services tell reads from writes). A user whose hash
// does not parse (config.Validate refuses it first) is reported and
// locked out, as the RESP server does; the store still requires a login.
func NewUsers(b Backend, password string, users []config.User) (*Users, error) {
	a, err := newACL(users)
	if err != nil {
		a = &acl{users: map[string]*aclUser{}}
	}
	return &Users{b: b, password: password, required: password != "" || len(users) > 0, a: a}, err
}

// Required reports whether a client must log in: a password or a user is
// configured. Otherwise every client is the default user.
func (s *Users) Required() bool { return s.required }

// Default is the default user, who may do everything.
func (s *Users) Default() *User { return &User{} }

// Login checks name and pass as RESP's AUTH does: name "default" (or "")
// with the password, or a user of the cluster file with its password. A
// wrong pair returns false (and, for a user, has paid the PBKDF2 cost).
func (s *Users) Login(name, pass string) (*User, bool) {
	if name == "" || name == "default" {
		if s.password == "" || subtle.ConstantTimeCompare([]byte(pass), []byte(s.password)) != 1 {
			return nil, false
		}
		return &User{}, true
	}
	u, ok := s.a.users[name]
	if !ok || !u.check(pass) {
		return nil, false
	}
	return &User{u: u}, true
}

// Named returns the user called name without a password, for a caller
// that has authenticated it otherwise (a client certificate signed by the
// cluster CA that names it). "default" names the default user only when a
// password defines it or no user is configured.
func (s *Users) Named(name string) (*User, bool) {
	u, ok := named(s.a, s.password, name)
	if !ok {
		return nil, false
	}
	return &User{u: u}, true
}

// Permit returns "" when u may submit req to namespace ns, else the same
// NOPERM error a RESP connection gets; cmd names the operation in it.
func (s *Users) Permit(u *User, ns string, req automaton.Request, cmd string) string {
	if u == nil || u.u == nil {
		return ""
	}
	return s.a.permit(s.b, u.u, ns, req, cmd)
}

// MayAccess reports whether u may read namespace ns at all.
func (s *Users) MayAccess(u *User, ns string) bool {
	return u == nil || u.u == nil || u.u.level(ns) != ""
}
