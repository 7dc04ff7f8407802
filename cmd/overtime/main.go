// Command overtime is Overtime's administration binary: the site manager (`overtime
// serve`, the API and boot script server), the boot server (`bootserver run`), the node
// agent (`agent run`, the same command as the desktops' own binary overtime-agent), Slurm's
// power saving programs (`slurm resume|suspend`) and the API's command-line
// client (most other subcommands; `ldap init` talks to the directory itself). It also
// runs a container guest's init (container.MaybeInit). The development tools (a throwaway
// slapd, a port forwarded into a network namespace) are another binary, overtime-dev,
// which is never packaged.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/overtime-hpc/overtime/node-agent/guest/container"
	"github.com/overtime-hpc/overtime/vocab/client"
)

func main() {
	// The container backend starts a guest's init by running this binary again; in that
	// process MaybeInit takes over and never returns.
	container.MaybeInit()
	os.Exit(cmdline.Execute(newRoot(), os.Args[1:], os.Stderr))
}

type globals struct {
	server       string
	caFile       string
	user         string
	passwordFile string
	output       string
	configFile   string
	zone         *time.Location // of times in tables (see useSiteZone)
	// flags is the root's persistent flag set: whether a flag was given on the command
	// line decides between it, the environment and the config file (see client).
	flags interface{ Changed(string) bool }
}

func newRoot() *cobra.Command {
	root, _ := newRootGlobals()
	return root
}

// newRootGlobals is newRoot, and the globals its flags fill.
func newRootGlobals() (*cobra.Command, *globals) {
	g := &globals{}
	root := &cobra.Command{
		Use:           "overtime",
		Short:         "Overtime site manager: pool PCs as a cluster, scheduled per 10-minute slot",
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Usage errors the flag parser and cobra's own checks find are exit status 2.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// `agent run` reads g.server itself (a daemon: flag or environment, no
			// config file); every client command resolves it again in g.settings.
			if !g.given("server") {
				g.server = envOr("OVERTIME_SERVER", g.server)
			}
			if err := checkOutputFlag(cmd, g.output); err != nil {
				return err
			}
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return cmdline.Usage(err)
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return cmdline.Usage(err)
			}
			return nil
		},
	}
	root.SetVersionTemplate("overtime {{.Version}}\n")
	pf := root.PersistentFlags()
	g.flags = pf
	pf.StringVar(&g.server, "server", defaultServer, "site manager URL ($OVERTIME_SERVER, config file)")
	pf.StringVar(&g.caFile, "ca-file", "", "PEM file of the CA that signed the site manager's certificate, trusted instead of the system's roots ($OVERTIME_CA_FILE, config file)")
	pf.StringVar(&g.user, "user", "", "directory user ($OVERTIME_USER, config file)")
	pf.StringVar(&g.passwordFile, "password-file", "", "file holding the password ($OVERTIME_PASSWORD_FILE, else $OVERTIME_PASSWORD, config file, else a prompt on a terminal)")
	pf.StringVar(&g.configFile, "config", "", "client config file ($OVERTIME_CONFIG, else $XDG_CONFIG_HOME/overtime/config.yaml)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml (commands that offer them)")

	root.AddCommand(
		newServeCmd(),
		newLDAPCmd(),
		newSiteCmd(g),
		newModeAtCmd(g),
		newRenderCmd(g),
		newWhoamiCmd(g),
		newUserCmd(g),
		newScheduleCmd(g),
		newAgentCmd(g),
		newJobReportCmd(g),
		newSlurmCmd(g),
		newAuditCmd(g),
		newVersionCmd(g),
		newDocsCmd(),
	)
	for _, c := range entityCmds(g) {
		if c.Name() == "bootserver" {
			// Next to the boot server records: running one.
			c.AddCommand(newBootServerCmd(g))
		}
		root.AddCommand(c)
	}
	// cobra adds these when it executes; adding them now lets the tree walks below (and
	// the man pages) see them.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	declareOutputFormats(root)
	cmdline.Strict(root)
	registerCompletions(root, g)
	return root, g
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// client builds an API client from the global flags, the environment and the config
// file, in that order of precedence.
func (g *globals) client() (*client.Client, error) {
	s, err := g.settings()
	if err != nil {
		return nil, err
	}
	hc, err := s.httpClient(60 * time.Second)
	if err != nil {
		return nil, err
	}
	return &client.Client{BaseURL: s.server, User: s.user, Password: s.password, HTTP: hc}, nil
}

// httpClient is the HTTP client of the settings: the system's roots, or the CA of
// --ca-file alone.
func (s clientSettings) httpClient(timeout time.Duration) (*http.Client, error) {
	if s.caFile == "" {
		return &http.Client{Timeout: timeout}, nil
	}
	b, err := os.ReadFile(s.caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", s.caFile)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: t, Timeout: timeout}, nil
}

// readSecret is a secret from file if given, else from the environment variable env.
func readSecret(file, env, what string) (string, error) {
	if file != "" {
		return readSecretFile(file, what)
	}
	if v := os.Getenv(env); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("no %s: give a --%s-file or set $%s", what, strings.ReplaceAll(what, " ", "-"), env)
}

// readSecretFile is a secret kept in a file: its content without the trailing newline.
func readSecretFile(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s file: %w", what, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
