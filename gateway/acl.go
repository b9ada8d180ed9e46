package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
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
	users map[string]*aclUser
	svcMu sync.Mutex
	svcs  map[string]service.Service // namespace -> service, for IsRead
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
			s.log.Warn("authentication failed", "id", c.id, "user", user, "remote", c.nc.RemoteAddr().String())
			return wrongPass
		}
		c.authed, c.user = true, nil
		return ""
	}
	u, ok := s.acl.users[user]
	if !ok || !u.check(pass) {
		s.log.Warn("authentication failed", "id", c.id, "user", user, "remote", c.nc.RemoteAddr().String())
		return wrongPass
	}
	c.authed, c.user = true, u
	return ""
}

// permit returns "" when c's user may submit req to namespace ns, else the
// NOPERM error reply.
func (c *conn) permit(ns string, req automaton.Request) string {
	u := c.user
	if u == nil {
		return ""
	}
	c.mu.Lock()
	cmd := c.lastCmd
	c.mu.Unlock()
	switch u.level(ns) {
	case config.ReadWrite:
		return ""
	case config.ReadOnly:
		if !c.s.acl.writes(c.s.b, ns, req) {
			return ""
		}
		return fmt.Sprintf("NOPERM User %s has no permissions to run the '%s' command", u.name, cmd)
	}
	return fmt.Sprintf("NOPERM User %s has no permissions to access the '%s' namespace", u.name, ns)
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
