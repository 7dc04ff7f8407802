package main

// The client config file, so that the password need not live in the environment:
//
//	# ~/.config/overtime/config.yaml
//	server: https://overtime.example.org
//	ca-file: ~/.config/overtime/site-ca.pem       # a site CA; default: the system's roots
//	user: alice
//	password-file: ~/.config/overtime/password   # or, in a file of mode 0600 only:
//	password: ...
//
// Each setting is taken from, in order: the command-line flag, the environment
// ($OVERTIME_SERVER, $OVERTIME_CA_FILE, $OVERTIME_USER, $OVERTIME_PASSWORD_FILE, $OVERTIME_PASSWORD), the
// config file, the default. The file is --config, else $OVERTIME_CONFIG, else
// $XDG_CONFIG_HOME/overtime/config.yaml (~/.config/overtime/config.yaml); only a file
// named by --config or $OVERTIME_CONFIG must exist. A password written in the file itself
// is refused unless the file is readable by its owner alone.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"
	"gopkg.in/yaml.v3"
)

const defaultServer = "http://127.0.0.1:8080"

// clientConfig is the config file's content.
type clientConfig struct {
	Server       string `yaml:"server"`
	CAFile       string `yaml:"ca-file"`
	User         string `yaml:"user"`
	PasswordFile string `yaml:"password-file"`
	Password     string `yaml:"password"`
}

// clientSettings are the resolved connection settings.
type clientSettings struct {
	server, caFile, user, password string
}

// given reports whether the flag name was given on the command line. A globals built
// without the root's flags (as some tests do) holds explicit values: those count as given.
func (g *globals) given(name string) bool {
	if g.flags != nil {
		return g.flags.Changed(name)
	}
	v := map[string]string{"server": g.server, "ca-file": g.caFile, "user": g.user, "password-file": g.passwordFile, "config": g.configFile}[name]
	return v != ""
}

// configPath returns the config file to read and whether the user named it (then it
// must exist).
func (g *globals) configPath() (string, bool) {
	if g.given("config") {
		return g.configFile, true
	}
	if p := os.Getenv("OVERTIME_CONFIG"); p != "" {
		return p, true
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", false
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "overtime", "config.yaml"), false
}

// loadConfig reads the config file ("" and no error: none to read).
func loadConfig(path string, required bool) (*clientConfig, error) {
	cfg := &clientConfig{}
	if path == "" {
		return cfg, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && !required {
		return cfg, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true) // a mistyped key must not be ignored silently
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config file %s: %s", path, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	if cfg.Password != "" {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("config file %s holds a password but is readable by others (mode %04o): chmod 600 it, or use password-file", path, fi.Mode().Perm())
		}
	}
	cfg.PasswordFile = expandHome(cfg.PasswordFile)
	cfg.CAFile = expandHome(cfg.CAFile)
	return cfg, nil
}

func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// settings resolves server, user and password: flag > environment > config file >
// default. Without any password while a user is set and stdin is a terminal, it asks.
func (g *globals) settings() (clientSettings, error) { return g.resolve(true) }

// resolve is settings, asking for a password on a terminal only if prompt is set.
func (g *globals) resolve(prompt bool) (clientSettings, error) {
	path, required := g.configPath()
	cfg, err := loadConfig(path, required)
	if err != nil {
		return clientSettings{}, err
	}
	pick := func(flag, flagVal, env, fromFile, def string) string {
		switch {
		case g.given(flag):
			return flagVal
		case os.Getenv(env) != "":
			return os.Getenv(env)
		case fromFile != "":
			return fromFile
		}
		return def
	}
	s := clientSettings{
		server: pick("server", g.server, "OVERTIME_SERVER", cfg.Server, defaultServer),
		caFile: pick("ca-file", g.caFile, "OVERTIME_CA_FILE", cfg.CAFile, ""),
		user:   pick("user", g.user, "OVERTIME_USER", cfg.User, ""),
	}
	// The password: a file from the flag or the environment, the password in the
	// environment, then the config file's file or password.
	pwFile := pick("password-file", g.passwordFile, "OVERTIME_PASSWORD_FILE", "", "")
	switch {
	case pwFile != "":
		s.password, err = readSecretFile(pwFile, "password")
	case os.Getenv("OVERTIME_PASSWORD") != "":
		s.password = os.Getenv("OVERTIME_PASSWORD")
	case cfg.PasswordFile != "":
		s.password, err = readSecretFile(cfg.PasswordFile, "password")
	case cfg.Password != "":
		s.password = cfg.Password
	case prompt && s.user != "" && term.IsTerminal(int(os.Stdin.Fd())):
		s.password, err = promptPassword(fmt.Sprintf("Password for %s: ", s.user))
	}
	return s, err
}

// promptPassword reads a password from the terminal without echo; the prompt goes to
// stderr so that stdout stays the command's output.
func promptPassword(prompt string) (string, error) {
	fmt.Fprint(os.Stderr, prompt)
	b, err := term.ReadPassword(int(os.Stdin.Fd()))
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	return string(b), nil
}
