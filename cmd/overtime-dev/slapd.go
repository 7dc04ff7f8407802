package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/overtime-hpc/overtime/internal/slapdenv"
)

// newSlapdCmd starts a throwaway slapd for demos and development, detached: it outlives
// the command (slapdenv runs it in a session of its own) and prints the environment
// `overtime ldap init` and `overtime serve` read to reach it. With a certificate
// (--tls-cert, --tls-key) it also speaks StartTLS and ldaps: the demo's university
// directory, which the desktops' sssd reaches over ldaps.
func newSlapdCmd() *cobra.Command {
	var dir, baseDN, rootPW, servicePW, tlsCert, tlsKey, tlsCA string
	var port, ldapsPort int
	slapd := &cobra.Command{
		Use:   "slapd",
		Short: "Start a throwaway OpenLDAP slapd with the Overtime schema in DIR (stop with `overtime-dev slapd-stop`)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(abs, 0o700); err != nil {
				return err
			}
			opts := slapdenv.Options{Port: port, BaseDN: baseDN, RootPW: rootPW, ServicePW: servicePW}
			switch {
			case (tlsCert == "") != (tlsKey == ""):
				return cmdline.Usagef("--tls-cert and --tls-key go together")
			case tlsCert == "" && (tlsCA != "" || ldapsPort != 0):
				return cmdline.Usagef("--tls-ca and --ldaps-port need --tls-cert and --tls-key")
			case tlsCert != "":
				files := []*string{&tlsCert, &tlsKey}
				if tlsCA != "" {
					files = append(files, &tlsCA)
				}
				for _, f := range files {
					// slapd runs in DIR: relative paths would not reach it.
					if *f, err = filepath.Abs(*f); err != nil {
						return err
					}
					if _, err := os.Stat(*f); err != nil {
						return err
					}
				}
				opts.TLS = &slapdenv.TLSOptions{CertFile: tlsCert, KeyFile: tlsKey, CAFile: tlsCA}
				opts.LDAPSPort = ldapsPort
			}
			srv, err := slapdenv.Start(abs, opts)
			if err != nil {
				return err
			}
			fmt.Printf("OVERTIME_LDAP_URL=%s\nOVERTIME_LDAP_BASE=%s\nOVERTIME_LDAP_BIND_DN=%s\nSLAPD_PID=%d\nSLAPD_SERVICE_DN=%s\n",
				srv.URL, srv.BaseDN, srv.RootDN, srv.PID, srv.ServiceDN)
			if srv.LDAPSURL != "" {
				fmt.Printf("SLAPD_LDAPS_URL=%s\n", srv.LDAPSURL)
			}
			return nil
		},
	}
	slapd.Flags().StringVar(&dir, "dir", "", "directory for the database, config and pid file")
	slapd.Flags().IntVar(&port, "port", 0, "port on 127.0.0.1 (0: pick a free one)")
	slapd.Flags().StringVar(&baseDN, "base-dn", "dc=example,dc=org", "base DN")
	slapd.Flags().StringVar(&rootPW, "root-password", "", "root DN password")
	slapd.Flags().StringVar(&servicePW, "service-password", "", "password of the service account (SLAPD_SERVICE_DN; it reads and writes everything but passwords); default: random")
	slapd.Flags().StringVar(&tlsCert, "tls-cert", "", "server certificate (PEM): slapd then offers StartTLS and listens for ldaps")
	slapd.Flags().StringVar(&tlsKey, "tls-key", "", "the server certificate's key (PEM)")
	slapd.Flags().StringVar(&tlsCA, "tls-ca", "", "CA certificates (PEM) slapd trusts (TLSCACertificateFile)")
	slapd.Flags().IntVar(&ldapsPort, "ldaps-port", 0, "ldaps port on 127.0.0.1 with --tls-cert (0: pick a free one)")
	_ = slapd.MarkFlagRequired("dir")
	_ = slapd.MarkFlagRequired("root-password")
	return slapd
}

// newSlapdStopCmd stops the slapd `overtime-dev slapd` started in DIR, by its pid file.
// (The help of `overtime dev slapd` named this command before it existed.)
func newSlapdStopCmd() *cobra.Command {
	var dir string
	stop := &cobra.Command{
		Use:   "slapd-stop",
		Short: "Stop the slapd `overtime-dev slapd` started in DIR (by DIR/slapd.pid)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return slapdenv.StopDir(dir)
		},
	}
	stop.Flags().StringVar(&dir, "dir", "", "the directory given to `overtime-dev slapd`")
	_ = stop.MarkFlagRequired("dir")
	return stop
}
