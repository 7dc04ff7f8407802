// Package wire holds the JSON documents the site manager exchanges with the programs
// that are not its API's people: node agents (configuration, heartbeats, job reports),
// the Slurm sync daemon and SPANK plugin (the node feed, AdminComment lines) and Slurm's
// power saving programs. The site's own schema (what an administrator edits and LDAP
// stores) is vocab/model; these types only travel. The C side parses the same JSON:
// scheduler-plugin/testdata holds fixtures this package's tests produce (and
// node-agent/agent's, for its job API), and the C tests read them, so a field renamed here
// fails there (fixture_test.go).
package wire
