package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/vocab/client"
)

// Dynamic shell completion (`overtime completion bash|zsh|fish|powershell` prints the
// script): names of hosts, pools, modes, images, exceptions, boot servers and users come
// from the site manager, with the connection settings of the command line being
// completed. When the server cannot be reached, or refuses, there are simply no
// suggestions: a completion must never print an error into the user's command line.

// completionTimeout bounds one completion request: a shell waits for it.
const completionTimeout = 2 * time.Second

// nameCollections maps an entity kind (and flags naming one) to its API collection.
var nameCollections = map[string]string{
	"host": "hosts", "pool": "pools", "mode": "modes", "image": "images",
	"bootserver": "bootservers", "boot-server": "bootservers", "exception": "exceptions", "role": "roles",
}

// names lists the names of one collection, or nothing if that fails.
func (g *globals) names(collection string) []string {
	// Never prompt for a password: the shell owns the terminal while completing.
	s, err := g.resolve(false)
	if err != nil {
		return nil
	}
	hc, err := s.httpClient(completionTimeout)
	if err != nil {
		return nil
	}
	c := &client.Client{BaseURL: s.server, User: s.user, Password: s.password, HTTP: hc}
	var all []map[string]any
	if _, err := c.Get("/api/v1/"+collection, nil, &all); err != nil {
		return nil
	}
	key := "name"
	if collection == "users" {
		key = "uid" // the name of a user is their display name
	}
	out := make([]string, 0, len(all))
	for _, x := range all {
		if n, ok := x[key].(string); ok && n != "" {
			out = append(out, n)
		}
	}
	return out
}

// complete completes the first n arguments (n < 0: all) from a collection.
func (g *globals) complete(collection string, n int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if n >= 0 && len(args) >= n {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return filterPrefix(g.names(collection), prefix, args), cobra.ShellCompDirectiveNoFileComp
	}
}

// filterPrefix keeps the names that start with prefix and are not already given.
func filterPrefix(names []string, prefix string, given []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && !contains(given, n) {
			out = append(out, n)
		}
	}
	return out
}

func contains(list []string, s string) bool { return indexOf(list, s) >= 0 }

// argCompletions are the commands whose arguments name things, by path.
var argCompletions = []struct {
	path       string
	collection string
	n          int
}{
	{"mode-at", "hosts", 1},
	{"agent status", "hosts", 1},
	{"host credential", "hosts", 1},
	{"image publish", "images", 1},
	{"slurm resume", "hosts", -1},
	{"slurm suspend", "hosts", -1},
	{"user delete", "users", 1},
	{"user passwd", "users", 1},
}

func registerCompletions(root *cobra.Command, g *globals) {
	for _, a := range argCompletions {
		c, _, err := root.Find(strings.Fields(a.path))
		if err != nil || c == root {
			panic("argCompletions names no command: " + a.path)
		}
		c.ValidArgsFunction = g.complete(a.collection, a.n)
	}
	for _, kind := range entityKinds {
		c, _, err := root.Find([]string{kind})
		if err != nil || c == root {
			panic("no entity command " + kind)
		}
		for _, sub := range c.Commands() {
			switch sub.Name() {
			case "show", "set", "delete":
				sub.ValidArgsFunction = g.complete(nameCollections[kind], 1)
			}
		}
	}
	// Flags that name things, wherever they are.
	walkCommands(root, func(c *cobra.Command) {
		for flag, coll := range map[string]string{"host": "hosts", "pool": "pools", "mode": "modes", "image": "images", "boot-server": "bootservers"} {
			if c.LocalNonPersistentFlags().Lookup(flag) != nil {
				_ = c.RegisterFlagCompletionFunc(flag, g.complete(coll, -1))
			}
		}
		if c.Name() == "run" && c.Parent() != nil && c.Parent().Name() == "bootserver" {
			_ = c.RegisterFlagCompletionFunc("name", g.complete("bootservers", -1))
		}
	})
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}
