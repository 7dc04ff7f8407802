package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
)

// newSlapdCmd starts a throwaway slapd for demos and development, detached: it outlives
// the command (slapdenv runs it in a session of its own) and prints the environment
// `overtime ldap init` and `overtime serve` read to reach it.
func newSlapdCmd() *cobra.Command {
	var dir, baseDN, rootPW string
	var port int
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
			srv, err := slapdenv.Start(abs, slapdenv.Options{Port: port, BaseDN: baseDN, RootPW: rootPW})
			if err != nil {
				return err
			}
			fmt.Printf("OVERTIME_LDAP_URL=%s\nOVERTIME_LDAP_BASE=%s\nOVERTIME_LDAP_BIND_DN=%s\nSLAPD_PID=%d\n", srv.URL, srv.BaseDN, srv.RootDN, srv.PID)
			return nil
		},
	}
	slapd.Flags().StringVar(&dir, "dir", "", "directory for the database, config and pid file")
	slapd.Flags().IntVar(&port, "port", 0, "port on 127.0.0.1 (0: pick a free one)")
	slapd.Flags().StringVar(&baseDN, "base-dn", "dc=example,dc=org", "base DN")
	slapd.Flags().StringVar(&rootPW, "root-password", "", "root DN password")
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
