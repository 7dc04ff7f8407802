package slapdenv

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// ReplicationTimeout bounds how long StartReplicated waits for the providers to have
// replicated from each other.
var ReplicationTimeout = 30 * time.Second

// StartReplicated starts len(dirs) slapd servers (at least two) as multi-provider
// replicas of one suffix: server i has serverID i+1 and a refreshAndPersist syncrepl
// from every other server, as the replicator account; each accepts writes. opts applies
// to all of them (Port is ignored: each gets a free one); they share the passwords.
//
// The first server is bootstrapped (base entry, service and replicator accounts) as
// Start does; the others start empty and receive everything by replication, because
// providers that each added the base entry would hold two different entries of one DN.
// It returns once every server has seen a write made on every other one, so the mesh is
// known to work in all directions. Stop each server; on error none is left running.
func StartReplicated(dirs []string, opts Options) ([]*Server, error) {
	if len(dirs) < 2 {
		return nil, fmt.Errorf("slapdenv: a replicated set needs at least two servers, got %d", len(dirs))
	}
	// One set of passwords for every server of the set.
	opts.fillPasswords()
	// Every peer's URL must be in the others' configurations before any starts, so the
	// ports are chosen first, all held open together so that they differ.
	ports, err := freePorts(len(dirs))
	if err != nil {
		return nil, err
	}
	urls := make([]string, len(dirs))
	for i, p := range ports {
		urls[i] = fmt.Sprintf("ldap://127.0.0.1:%d", p)
	}
	var servers []*Server
	fail := func(err error) ([]*Server, error) {
		for _, s := range servers {
			_ = s.Stop()
		}
		return nil, err
	}
	for i, dir := range dirs {
		o := opts
		o.Port = ports[i]
		o.ServerID = i + 1
		o.Peers = nil
		for j, u := range urls {
			if j != i {
				o.Peers = append(o.Peers, u)
			}
		}
		o.replica = i > 0
		s, err := Start(dir, o)
		if err != nil {
			return fail(fmt.Errorf("slapdenv: replicated server %d of %d: %w", i+1, len(dirs), err))
		}
		servers = append(servers, s)
	}
	if err := CheckReplication(servers, ReplicationTimeout); err != nil {
		return fail(err)
	}
	return servers, nil
}

// CheckReplication writes a marker on each server in turn (the description of the
// replicator entry, as rootdn) and waits until every other server holds it, polling
// until timeout. It proves that every direction of the mesh replicates now.
func CheckReplication(servers []*Server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for i, s := range servers {
		// Until the first server's entries have reached s, there is nothing to modify.
		if err := waitFor(deadline, func() (bool, error) {
			_, ok, err := s.rootRead(s.ReplicatorDN, "description")
			return ok, err
		}); err != nil {
			return fmt.Errorf("slapdenv: %s never received %s by replication: %w", s.URL, s.ReplicatorDN, err)
		}
		marker := fmt.Sprintf("replication check from serverID %d at %s", s.ServerID, time.Now().Format(time.RFC3339Nano))
		c, err := s.rootConn()
		if err != nil {
			return err
		}
		mod := ldap.NewModifyRequest(s.ReplicatorDN, nil)
		mod.Replace("description", []string{marker})
		err = c.Modify(mod)
		c.Close()
		if err != nil {
			return fmt.Errorf("slapdenv: write a replication marker on %s: %w", s.URL, err)
		}
		for j, o := range servers {
			if j == i {
				continue
			}
			if err := waitFor(deadline, func() (bool, error) {
				v, _, err := o.rootRead(s.ReplicatorDN, "description")
				return v == marker, err
			}); err != nil {
				return fmt.Errorf("slapdenv: a write on %s (serverID %d) did not reach %s (serverID %d) within %v: %w; its log:\n%s",
					s.URL, s.ServerID, o.URL, o.ServerID, timeout, err, o.LogTail(15))
			}
		}
	}
	return nil
}

var errDeadline = errors.New("deadline passed")

// waitFor polls cond every 20 ms until it holds or the deadline passes. Errors of cond
// are remembered (a server still starting refuses connections) and returned at the end.
func waitFor(deadline time.Time, cond func() (bool, error)) error {
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("%w (last error: %v)", errDeadline, last)
			}
			return errDeadline
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rootConn is a connection bound as the rootdn, which bypasses the ACLs.
func (s *Server) rootConn() (*ldap.Conn, error) {
	c, err := ldap.DialURL(s.URL, ldap.DialWithDialer(&net.Dialer{Timeout: time.Second}))
	if err != nil {
		return nil, fmt.Errorf("slapdenv: %w", err)
	}
	c.SetTimeout(5 * time.Second)
	if err := c.Bind(s.RootDN, s.RootPW); err != nil {
		c.Close()
		return nil, fmt.Errorf("slapdenv: bind as %s on %s: %w", s.RootDN, s.URL, err)
	}
	return c, nil
}

// rootRead reads one attribute of one entry as rootdn; ok is false when the entry does
// not exist.
func (s *Server) rootRead(dn, attr string) (value string, ok bool, err error) {
	c, err := s.rootConn()
	if err != nil {
		return "", false, err
	}
	defer c.Close()
	res, err := c.Search(ldap.NewSearchRequest(dn, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{attr}, nil))
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return "", false, nil
	}
	if err != nil || len(res.Entries) != 1 {
		return "", false, err
	}
	return res.Entries[0].GetAttributeValue(attr), true, nil
}

// freePorts finds n distinct free ports on 127.0.0.1 by holding n listeners at once.
func freePorts(n int) ([]int, error) {
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("slapdenv: free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
