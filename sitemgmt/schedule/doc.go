// Package schedule decides, per host and instant, which boot mode a pool PC gets.
//
// Weekly rules are wall-clock rules in the site's time zone on a 10-minute grid, so a
// week is 1008 slots. Compile turns a validated site into an immutable Engine: every
// distinct combination of pool and host rules becomes one precomputed week table,
// shared by all hosts that use it, so that answering a DHCP/iPXE request or rendering
// the whole site costs a table look-up, not a rule walk. Precedence, most specific
// first: host exception, pool exception, host weekly rule, pool weekly rule, site
// default.
package schedule
