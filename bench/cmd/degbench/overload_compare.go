package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// overloadCompareCmd runs `degbench overload` for one system n times with
// each of two daemon binaries (A and B: before and after a change), in
// turn, and prints each judged phase's goodput and top class per run,
// their means and standard deviations, and B - A with two standard
// errors. One run of a scenario is noise: cpu3x's goodput moved by 8/s
// (5%) from run to run on one machine, more than most changes of the law
// it was asked to judge (bench/findings.md, F8's eleventh round). It is a
// tool for deciding a change, not a report: run.sh does not run it.
func overloadCompareCmd(args []string) error {
	fs := flag.NewFlagSet("overload-compare", flag.ExitOnError)
	a := fs.String("a", "", "degraded binary A (before)")
	b := fs.String("b", "", "degraded binary B (after)")
	aBench := fs.String("a-bench", "", "degbench binary that runs A (default: this one); another one tests a change of the client")
	bBench := fs.String("b-bench", "", "degbench binary that runs B (default: this one)")
	system := fs.String("system", sysGraduated, "the system to run ("+strings.Join(allSystems, ", ")+")")
	scenarios := fs.String("scenarios", "cpu3x", "scenarios to run, comma-separated")
	n := fs.Int("n", 6, "runs of each binary")
	seed := fs.Uint64("seed", 1, "seed of the arrivals (the same for every run)")
	dir := fs.String("dir", "", "where the runs' results are kept (default: a temporary directory, removed)")
	quick := fs.Bool("quick", false, "a few seconds per phase (a smoke of the command, not a measurement)")
	_ = fs.Parse(args)
	switch {
	case *a == "" || *b == "":
		return fmt.Errorf("-a and -b name the two degraded binaries")
	case *n < 2:
		return fmt.Errorf("-n must be at least 2 (was %d): a standard deviation needs two runs", *n)
	case !slices.Contains(allSystems, *system) || *system == sysFixed:
		return fmt.Errorf("unknown system %q (known: %s, not fixed)", *system, strings.Join(allSystems, ", "))
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	out := *dir
	if out == "" {
		if out, err = os.MkdirTemp("", "degbench-compare"); err != nil {
			return err
		}
		defer os.RemoveAll(out)
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	sides := []struct {
		name, binary, bench string
		results             []*overloadResult
	}{{"A", *a, cmp.Or(*aBench, self), nil}, {"B", *b, cmp.Or(*bBench, self), nil}}
	for i := range *n {
		for s := range sides {
			side := &sides[s]
			file := filepath.Join(out, fmt.Sprintf("%s-%d.json", side.name, i+1))
			args := []string{"overload", "-binary", side.binary, "-systems", *system, "-scenarios", *scenarios, "-seed", fmt.Sprint(*seed), "-out", file}
			if *quick {
				args = append(args, "-quick")
			}
			cmd := exec.Command(side.bench, args...)
			cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
			fmt.Fprintf(os.Stderr, "overload-compare: %s run %d of %d\n", side.name, i+1, *n)
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s run %d: %s: %w", side.name, i+1, strings.Join(cmd.Args, " "), err)
			}
			res, err := readOverload(file)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", side.name, i+1, err)
			}
			side.results = append(side.results, res)
		}
	}
	rows, err := compareOverload(sides[0].results, sides[1].results, *system)
	if err != nil {
		return err
	}
	writeCompare(os.Stdout, rows)
	return nil
}

// readOverload reads a result `degbench overload` wrote.
func readOverload(path string) (*overloadResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res overloadResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &res, nil
}

// compareRow is one judged phase of one scenario: each run's goodput (%
// of min(offered, capacity)) and top class ok (%), for A ([0]) and B
// ([1]); Early and Late split the goodput (phaseStat.EarlyPercent), empty
// when the phase is too short to split.
type compareRow struct {
	Scenario, Phase string
	Goodput, Top    [2][]float64
	Early, Late     [2][]float64
}

// compareOverload lines up the judged phases of system's runs in a and b.
// Every result must hold the same scenarios and phases.
func compareOverload(a, b []*overloadResult, system string) ([]compareRow, error) {
	var rows []compareRow
	index := map[[2]string]int{}
	for side, results := range [2][]*overloadResult{a, b} {
		for _, res := range results {
			for _, sc := range res.Scenarios {
				i := slices.IndexFunc(sc.Runs, func(r systemRun) bool { return r.System == system })
				if i < 0 {
					return nil, fmt.Errorf("scenario %s has no run of %s", sc.Name, system)
				}
				stats := phaseStats(sc.scenarioSpec, sc.Runs[i], res.BinSeconds)
				for pi, ph := range sc.Phases {
					if !ph.Judged {
						continue
					}
					k := [2]string{sc.Name, ph.Name}
					j, ok := index[k]
					if !ok {
						j = len(rows)
						index[k] = j
						rows = append(rows, compareRow{Scenario: sc.Name, Phase: ph.Name})
					}
					r := &rows[j]
					r.Goodput[side] = append(r.Goodput[side], stats[pi].GoodputPercent)
					r.Top[side] = append(r.Top[side], stats[pi].Class[0].OKPercent())
					if st := stats[pi]; !math.IsNaN(st.EarlyPercent) {
						r.Early[side] = append(r.Early[side], st.EarlyPercent)
						r.Late[side] = append(r.Late[side], st.LatePercent)
					}
				}
			}
		}
	}
	for _, r := range rows {
		if len(r.Goodput[0]) != len(a) || len(r.Goodput[1]) != len(b) {
			return nil, fmt.Errorf("%s %s: in %d of A's %d runs and %d of B's %d: the runs differ", r.Scenario, r.Phase, len(r.Goodput[0]), len(a), len(r.Goodput[1]), len(b))
		}
	}
	return rows, nil
}

// meanSD is the mean and the sample standard deviation of xs.
func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
}

// diff is B's mean less A's, and two standard errors of that difference
// (about a 95% interval for a few runs of each).
func diff(a, b []float64) (d, twoSE float64) {
	ma, sa := meanSD(a)
	mb, sb := meanSD(b)
	return mb - ma, 2 * math.Sqrt(sa*sa/float64(len(a))+sb*sb/float64(len(b)))
}

// compareMeasure is one line of a compared phase: a measure's runs, A's
// and B's.
type compareMeasure struct {
	name string
	v    [2][]float64
}

// writeCompare writes the rows as a markdown table.
func writeCompare(w io.Writer, rows []compareRow) {
	runs := func(xs []float64) string {
		s := make([]string, len(xs))
		for i, x := range xs {
			s[i] = fmt.Sprintf("%.1f", x)
		}
		return strings.Join(s, ", ")
	}
	summary := func(xs []float64) string {
		m, sd := meanSD(xs)
		return fmt.Sprintf("%.1f ± %.1f", m, sd)
	}
	fmt.Fprintln(w, "| scenario | phase | measure | A: runs | A: mean ± sd | B: runs | B: mean ± sd | B - A (± 2 SE) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		measures := []compareMeasure{{"goodput %", r.Goodput}, {"top class ok %", r.Top}}
		if len(r.Early[0]) > 0 && len(r.Early[1]) > 0 {
			measures = append(measures, compareMeasure{fmt.Sprintf("goodput %%, first %g s", earlySeconds), r.Early}, compareMeasure{"goodput %, after", r.Late})
		}
		for _, m := range measures {
			d, se := diff(m.v[0], m.v[1])
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %+.1f ± %.1f |\n", r.Scenario, r.Phase, m.name,
				runs(m.v[0]), summary(m.v[0]), runs(m.v[1]), summary(m.v[1]), d, se)
		}
	}
}
