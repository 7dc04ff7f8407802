package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/synth"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// The production HTTP server: `overtime serve --images-dir` (-overtime BIN). It needs
// its directory, so the benchmark starts a throwaway slapd (internal/slapdenv) on the
// host's loopback, initialises an empty site in it, and relays 127.0.0.1:389 of each
// server namespace to it: the server then runs in the namespace exactly as on a boot
// server, with its directory on "localhost". For the storms the site stays empty (serving
// /images/... does not look at it); the -switch benchmark writes the synthetic site of
// the room into it, so that every PC's boot script is rendered for a known host.

type overtimeServer struct {
	slapd  *slapdenv.Server
	pwFile string
	bin    string
}

// startOvertime starts the directory for `overtime serve`; site, when not nil, is written
// into it (the -switch benchmark: the boot scripts are rendered for its hosts).
func startOvertime(bin, dir string, site *model.Site) (*overtimeServer, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, err
	}
	var pw [12]byte
	_, _ = rand.Read(pw[:])
	d, err := synth.StartDirectory(context.Background(), dir, "bootstorm", hex.EncodeToString(pw[:]), site, slapdenv.Options{Attached: true, LogLevel: "0"})
	if err != nil {
		return nil, fmt.Errorf("ldap init: %w", err)
	}
	d.Store.Close() // overtime serve has its own connections
	s := d.Slapd
	o := &overtimeServer{slapd: s, bin: bin}
	o.pwFile = filepath.Join(dir, "ldap-service.pw")
	if err := os.WriteFile(o.pwFile, []byte(s.ServicePW), 0o600); err != nil {
		o.stop()
		return nil, err
	}
	return o, nil
}

// command is the -http-cmd template that runs `overtime serve` in a server namespace.
func (o *overtimeServer) command() string {
	return fmt.Sprintf("%s serve --listen {listen} --images-dir {images} --ldap-url ldap://127.0.0.1:389 --base-dn %s --bind-dn %s --bind-password-file %s --reload 0",
		o.bin, o.slapd.BaseDN, o.slapd.ServiceDN, o.pwFile)
}

func (o *overtimeServer) stop() {
	if o != nil && o.slapd != nil {
		_ = o.slapd.Stop()
	}
}

// relay forwards TCP connections made to listen inside the namespace n to target on the
// host (this process's own namespace). Close stops it and every connection.
type relay struct {
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startRelay(n *netns.NS, listen, target string) (*relay, error) {
	ln, err := n.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, conns: map[net.Conn]bool{}}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			r.track(c, up)
			r.wg.Add(2)
			for _, p := range [][2]net.Conn{{c, up}, {up, c}} {
				go func() {
					defer r.wg.Done()
					_, _ = io.Copy(p[0], p[1])
					if tc, ok := p[0].(*net.TCPConn); ok {
						_ = tc.CloseWrite()
					}
				}()
			}
		}
	}()
	return r, nil
}

func (r *relay) track(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		r.conns[c] = true
	}
}

func (r *relay) Close() error {
	err := r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
