// Command harvest simulates how much CPU a pool of desktop PCs gives a Slurm cluster, and
// at what cost to the people at the desks, under four sharing policies: the node agent's
// real decision engine with the default pool policy (node-agent/policy), HTCondor's
// documented desktop policy, a BOINC-style nice-19 guest and after-hours-only cluster
// mode. The week of pool use it replays is synthetic but published: poolweek.go generates
// it from a seed (the model and its parameters are documented there), and
//
//	go run ./test/bench/harvest -gen -hosts 200 -seed 1 -out poolweek-seed1.json
//
// writes it as JSON, one host per line. The same trace replayed from the file:
//
//	go run ./test/bench/harvest -in poolweek-seed1.json
//
// prints the comparison table; without -in the trace is generated in memory from -hosts
// and -seed. The published figures (docs/benchmarks/harvest.md, .json, .png) come from
// the benchmark, 200 hosts and seeds 1-5:
//
//	go test -run '^$' -bench Harvest -benchtime 1x ./test/bench/harvest -args -out docs/benchmarks
//
// The desktop slowdown columns are modelled (slowdown.go): default placeholder
// coefficients, or the interference matrix's measured ones with
//
//	go test -run '^$' -bench Harvest -benchtime 1x ./test/bench/harvest -args -out docs/benchmarks \
//		-interference docs/benchmarks/interference/interference.json
//
// The reservations benchmark (issue 15, reservations.go) replays a week with changes that
// stop the guest (ReservationParams) through one Slurm queue over the pool, without and
// with reservations and warning signals (docs/benchmarks/reservations.*):
//
//	go test -run '^$' -bench Reservations -benchtime 1x ./test/bench/harvest -args -out docs/benchmarks
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "harvest:", err)
		os.Exit(1)
	}
}

// run is the command; its flags live in their own set so that the test binary's flags
// (-out for the benchmark) do not clash with them.
func run(args []string) error {
	fs := flag.NewFlagSet("harvest", flag.ContinueOnError)
	genOnly := fs.Bool("gen", false, "write the generated trace to -out and exit")
	hosts := fs.Int("hosts", DefaultParams().Hosts, "hosts in the pool (rooms of 20)")
	seed := fs.Uint64("seed", 1, "random seed of the pool week")
	out := fs.String("out", "", "with -gen: the trace file to write (JSON)")
	in := fs.String("in", "", "replay this trace file instead of generating one")
	interference := fs.String("interference", "", "the interference matrix's interference.json: its simCoefficients replace the default slowdown coefficients")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var tr *Trace
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			return err
		}
		tr, err = ReadTrace(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", *in, err)
		}
	} else {
		p := DefaultParams()
		p.Hosts = *hosts
		var err error
		if tr, err = Generate(p, *seed); err != nil {
			return err
		}
	}
	if *genOnly {
		if *out == "" {
			return fmt.Errorf("-gen needs -out FILE")
		}
		return writeTraceFile(*out, tr)
	}
	opt := DefaultSimOptions()
	m, err := coefficientsFor(*interference)
	if err != nil {
		return err
	}
	opt.Model = m
	rep := Simulate(tr, Policies(), opt)
	fmt.Print(resultTable(rep))
	return nil
}
