package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

func newHandoffs() *cobra.Command {
	cmd := &cobra.Command{Use: "handoffs", Short: "Hand work over, answer, inspect and follow handoffs"}
	var f clientFlags
	history := &cobra.Command{
		Use:   "history TASK_ID",
		Short: "Print a task's timeline: every handoff event and every packet, oldest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.needProject(); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			h, err := c.TaskHistory(cmd.Context(), f.project, args[0])
			if err != nil {
				return err
			}
			printHistory(cmd.OutOrStdout(), f.project, h)
			return nil
		},
	}
	f.registerWith(history, "project (env CONTEXTD_PROJECT), required")
	cmd.AddCommand(history)
	cmd.AddCommand(handoffCommands()...)
	return cmd
}

func printHistory(out io.Writer, project string, h *apiclient.TaskHistory) {
	fmt.Fprintf(out, "task %s in %s: %d entries\n\n", h.TaskId, project, len(h.Entries))
	for _, e := range h.Entries {
		at := e.Time.Format(time.RFC3339)
		if e.Type == "packet" {
			step := ""
			if e.StepId != nil {
				step = " step " + *e.StepId
			}
			fmt.Fprintf(out, "%s  %-12s packet   %s%s (agent %s)\n", at, e.Role, deref(e.PacketId), step, e.Agent)
			continue
		}
		from := "·"
		if e.FromStatus != nil {
			from = *e.FromStatus
		}
		line := fmt.Sprintf("%s  %-12s %-9s %s  %s → %s  [%s → %s] (agent %s)", at, e.Role, deref(e.Event), deref(e.HandoffId),
			deref(e.SourceRole), deref(e.TargetRole), from, deref(e.ToStatus), e.Agent)
		if e.Reason != nil && *e.Reason != "" {
			line += "  reason: " + *e.Reason
		}
		fmt.Fprintln(out, line)
	}
}
