package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
	"github.com/contextd/contextd/internal/bisect"
)

// maxBisectRuns bounds --max-runs: every run is an ablation and an outcome
// stored for good, so a typo cannot fill a project with thousands.
const maxBisectRuns = 1000

// exitCode is an error that chooses the process's exit status; err nil
// prints nothing (the command has said what it had to).
type exitCode struct {
	code int
	err  error
}

func (e *exitCode) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitCode) Unwrap() error { return e.err }

// bisectEntry is one entry the packet included, named as `contextd
// ablate --without` and the ablation API name it.
type bisectEntry struct {
	name    string
	record  apiclient.Record
	without apiclient.AblationEntry
}

// bisectReport is what bisect prints: one object with --json.
type bisectReport struct {
	PacketID          string          `json:"packet_id"`
	Project           string          `json:"project"`
	Entries           int             `json:"entries"`
	Found             bool            `json:"found"`
	Minimal           bool            `json:"minimal"`
	OriginalSucceeded bool            `json:"original_succeeded"`
	BoundReached      bool            `json:"bound_reached"`
	Runs              int             `json:"runs"`
	MaxRuns           int             `json:"max_runs"`
	ProvedBy          string          `json:"proved_by,omitempty"`
	Suspects          []bisectSuspect `json:"suspects"`
	Trials            []bisectTrial   `json:"trials"`
}

type bisectSuspect struct {
	Entry    string  `json:"entry"`
	Subject  string  `json:"subject"`
	Key      string  `json:"key"`
	Layer    *string `json:"layer,omitempty"`
	Version  *int    `json:"version,omitempty"`
	ProvedBy string  `json:"proved_by"`
	Original string  `json:"original"`
}

type bisectTrial struct {
	Run       int      `json:"run"`
	PacketID  string   `json:"packet_id"`
	Without   []string `json:"without"`
	Status    string   `json:"status"`
	Detail    string   `json:"detail"`
	OutcomeID string   `json:"outcome_id"`
}

func newBisect() *cobra.Command {
	var f clientFlags
	var packetID, script string
	var maxRuns int
	var runTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "bisect --packet ID --run CMD [--max-runs 32]",
		Short: "Find the entries of a failing packet whose removal makes CMD succeed (delta debugging over ablations)",
		Long: `bisect looks for a smallest set of a packet's included entries (items of
both layers, request parts, context packets, predecessors) whose removal
turns a failure into a success, and proves it with a counterfactual packet.

CMD runs with sh -c, the rendered prompt on standard input: exit 0 is a
success, any other exit (or a run past --run-timeout) a failure. CMD's
output goes to standard error. bisect runs CMD on the packet first, then on
counterfactual packets (contextd ablate) without sets of its entries, chosen
by delta debugging (ddmin: without everything, then halves, then finer
chunks and their complements), and records every run's outcome on the
packet it ran (source test, label bisect). The same packet and the same CMD
answers ask for the same ablations, in the same order.

The set it prints is 1-minimal (leaving any one of its entries in fails)
unless the bound came first: --max-runs counts every run of CMD, the first
included; at the bound bisect prints the smallest set it saw succeed and
says it is not proven minimal. Each suspect names the ablation whose success
proves it and the failing original.

Exit status: 0 a set was found (suspects printed); 1 none was: the packet
succeeds as it is (nothing to find), it fails even without every entry, or
the bound came before any success; 2 a usage error, a server error or a
CMD that could not be started.`,
		Example: `  contextd bisect --project acme --packet ctxpkt_01J... --run './judge.sh'
  contextd bisect --packet ctxpkt_01J... --run 'model | grep -q "14 days"' --max-runs 16 --json
  contextd bisect --project acme --packet ctxpkt_01J... --run 'grep -q PLANTED && exit 1 || exit 0'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return &exitCode{2, err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case packetID == "":
				return &exitCode{2, errors.New("--packet is required: the failing packet")}
			case strings.TrimSpace(script) == "":
				return &exitCode{2, errors.New("--run is required: the command that judges a prompt (exit 0: success)")}
			case maxRuns < 1 || maxRuns > maxBisectRuns:
				return &exitCode{2, fmt.Errorf("--max-runs is from 1 to %d", maxBisectRuns)}
			case runTimeout <= 0:
				return &exitCode{2, errors.New("--run-timeout must be positive")}
			}
			rep, err := runBisect(cmd, &f, packetID, script, maxRuns, runTimeout)
			if err != nil {
				return &exitCode{2, err}
			}
			if f.json {
				err = printJSON(cmd.OutOrStdout(), rep)
			} else {
				printBisect(cmd.OutOrStdout(), rep)
			}
			if err != nil {
				return &exitCode{2, err}
			}
			if !rep.Found {
				return &exitCode{1, nil}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitCode{2, err} })
	f.register(cmd)
	f.registerJSON(cmd)
	cmd.Flags().StringVar(&packetID, "packet", "", "the failing packet (required)")
	cmd.Flags().StringVar(&script, "run", "", "the command that judges a prompt on its standard input, run with sh -c; exit 0 is a success (required)")
	cmd.Flags().IntVar(&maxRuns, "max-runs", 32, fmt.Sprintf("the most runs of the command, the packet's own included (at most %d)", maxBisectRuns))
	cmd.Flags().DurationVar(&runTimeout, "run-timeout", 60*time.Second, "the longest one run of the command may take; past it the run is a failure")
	return cmd
}

// runBisect reads the packet and its included entries, and runs the
// search with a Test that ablates, runs the command and records the
// outcome.
func runBisect(cmd *cobra.Command, f *clientFlags, packetID, script string, maxRuns int, timeout time.Duration) (*bisectReport, error) {
	c, err := f.client()
	if err != nil {
		return nil, err
	}
	ctx := cmd.Context()
	orig, err := c.findPacket(ctx, f.project, packetID)
	if err != nil {
		return nil, err
	}
	entries, err := includedEntries(ctx, c, orig)
	if err != nil {
		return nil, err
	}
	rep := &bisectReport{PacketID: orig.PacketId, Project: orig.Project, Entries: len(entries), MaxRuns: maxRuns,
		Suspects: []bisectSuspect{}, Trials: []bisectTrial{}}
	stderr := cmd.ErrOrStderr()
	test := func(ctx context.Context, removed []int) (bool, string, error) {
		trial := bisectTrial{Run: len(rep.Trials) + 1, Without: []string{}}
		p, err := orig, error(nil)
		if len(removed) > 0 {
			without := make([]apiclient.AblationEntry, len(removed))
			for i, e := range removed {
				without[i] = entries[e].without
				trial.Without = append(trial.Without, entries[e].name)
			}
			if p, err = c.Ablate(ctx, orig.Project, orig.PacketId, without); err != nil {
				return false, "", fmt.Errorf("run %d: ablate %s: %w", trial.Run, orig.PacketId, err)
			}
		}
		trial.PacketID = p.PacketId
		ok, detail, err := runJudge(ctx, script, p.Rendered, timeout, stderr)
		if err != nil {
			return false, "", fmt.Errorf("run %d: %w", trial.Run, err)
		}
		trial.Status, trial.Detail = "failure", detail
		if ok {
			trial.Status = "success"
		}
		source, label := "test", "bisect"
		note := fmt.Sprintf("contextd bisect of %s, run %d: %s", orig.PacketId, trial.Run, detail)
		o, err := c.RecordOutcome(ctx, orig.Project, p.PacketId, apiclient.OutcomeCreate{Status: trial.Status, Source: &source, Label: &label, Note: &note})
		if err != nil {
			return false, "", fmt.Errorf("run %d: record the outcome of %s: %w", trial.Run, p.PacketId, err)
		}
		trial.OutcomeID = o.Id
		rep.Trials = append(rep.Trials, trial)
		fmt.Fprintf(stderr, "bisect: run %d of %d: %s without %d of %d entries: %s (%s)\n",
			trial.Run, maxRuns, p.PacketId, len(removed), len(entries), trial.Status, detail)
		return ok, p.PacketId, nil
	}
	res, err := bisect.Minimize(ctx, len(entries), maxRuns, test)
	if err != nil {
		return nil, err
	}
	rep.Runs, rep.OriginalSucceeded, rep.BoundReached = res.Runs(), res.OriginalSucceeded, res.Exhausted
	if res.Proof != nil {
		rep.Found, rep.Minimal, rep.ProvedBy = true, res.Minimal, res.Proof.Ref
		for _, i := range res.Set {
			e := entries[i]
			rep.Suspects = append(rep.Suspects, bisectSuspect{Entry: e.name, Subject: e.record.Subject, Key: e.record.Key,
				Layer: e.record.Layer, Version: e.record.Version, ProvedBy: res.Proof.Ref, Original: orig.PacketId})
		}
	}
	return rep, nil
}

// includedEntries are the packet's included records, in the packet's
// order, each named as the ablation API's without entries name it.
func includedEntries(ctx context.Context, c *client, p *apiclient.Packet) ([]bisectEntry, error) {
	included := "included"
	var l apiclient.RecordList
	res, err := c.Raw().ListPacketRecords(ctx, p.Project, p.PacketId, &apiclient.ListPacketRecordsParams{Decision: &included})
	if err := c.ReadAnswer(res, err, &l); err != nil {
		return nil, err
	}
	var out []bisectEntry
	for _, r := range l.Data {
		if r.Decision != "included" {
			continue
		}
		key := r.Key
		e := bisectEntry{record: r}
		switch r.Subject {
		case "item":
			e.without = apiclient.AblationEntry{Key: &key, Layer: r.Layer}
			e.name = key
			if layer := deref(r.Layer); layer == "shared" || ablationEntry(key).Key == nil || strings.HasPrefix(key, "project:") || strings.HasPrefix(key, "shared:") {
				// A key ablate would read as something else names its layer.
				e.name = first(layer, "project") + ":" + key
			}
		case "request":
			e.without, e.name = apiclient.AblationEntry{Request: &key}, "request:"+key
		case "handoff":
			e.without, e.name = apiclient.AblationEntry{Handoff: &key}, "handoff:"+key
		default:
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// runJudge runs the command on one prompt: success on exit 0, failure on
// another exit or past the timeout (detail says which); an error when it
// could not run at all or the bisect itself was stopped.
func runJudge(ctx context.Context, script, prompt string, timeout time.Duration, output io.Writer) (bool, string, error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, "sh", "-c", script)
	cmd.Stdin = strings.NewReader(prompt)
	cmd.Stdout, cmd.Stderr = output, output
	// A child that keeps the output open past the kill does not hold the
	// bisect.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return false, "", ctx.Err()
	case runCtx.Err() != nil:
		return false, fmt.Sprintf("timed out after %s", timeout), nil
	case err == nil:
		return true, "exit 0", nil
	case errors.As(err, &exit):
		return false, fmt.Sprintf("exit %d", exit.ExitCode()), nil
	}
	return false, "", fmt.Errorf("run %q: %w", script, err)
}

// printBisect writes the report as text: what was found, then one line per
// suspect with the packets that prove it.
func printBisect(out io.Writer, r *bisectReport) {
	runs := fmt.Sprintf("%d runs of at most %d", r.Runs, r.MaxRuns)
	switch {
	case r.OriginalSucceeded:
		fmt.Fprintf(out, "packet %s succeeds as it is: there is nothing to find (%s)\n", r.PacketID, runs)
	case r.Found:
		proven := "1-minimal: leaving any one of them in fails"
		if !r.Minimal {
			proven = "not proven minimal: the bound came first"
		}
		fmt.Fprintf(out, "packet %s fails; without %d of its %d entries it succeeds (%s; %s)\n", r.PacketID, len(r.Suspects), r.Entries, runs, proven)
		for _, s := range r.Suspects {
			what := s.Subject
			if s.Version != nil {
				what += fmt.Sprintf(" v%d", *s.Version)
			}
			fmt.Fprintf(out, "suspect %s (%s): proved by %s (success) against %s (failure)\n", s.Entry, what, s.ProvedBy, s.Original)
		}
	case r.BoundReached:
		fmt.Fprintf(out, "packet %s fails; no removal succeeded before the bound (%s)\n", r.PacketID, runs)
	case r.Entries == 0:
		fmt.Fprintf(out, "packet %s fails and included no entry to remove (%s)\n", r.PacketID, runs)
	default:
		fmt.Fprintf(out, "packet %s fails even without all its %d entries: no set of them explains the failure (%s)\n", r.PacketID, r.Entries, runs)
	}
}
