package ui

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/handoff"
)

// chainView is one handoff of a task with its rework chain.
type chainView struct {
	H           *handoff.Detail
	Ancestors   []handoff.Link // the handoff it reworks first, then that one's, ...
	Descendants []handoff.Link
}

type taskView struct {
	Project, Task string
	Timeline      []timelineView
	Handoffs      []chainView
	Packets       []timelineView
}

type timelineView struct {
	handoff.TimelineEntry
	// Viewable: the agent may open the packet (admins, and the packet's
	// own role; packet.Get decides the same).
	Viewable bool
}

// task shows a task's timeline (the task history service: handoff events
// and the packets assembled for it), each handoff's rework chain and the
// reasons given, and the packets.
func (h *handler) task(c echo.Context) error {
	s := sessionOf(c)
	ctx := c.Request().Context()
	proj, task := param(c, "project"), param(c, "task")
	entries, err := h.app.Handoffs.TaskHistory(ctx, s.Agent, proj, task)
	if err != nil {
		return h.fail(c, err)
	}
	v := &taskView{Project: proj, Task: task}
	seen := map[string]bool{}
	for _, e := range entries {
		tv := timelineView{TimelineEntry: e, Viewable: e.Type == "packet" && (s.Agent.IsAdmin() || s.Agent.Role == e.Role)}
		v.Timeline = append(v.Timeline, tv)
		if e.Type == "packet" {
			v.Packets = append(v.Packets, tv)
			continue
		}
		if e.Handoff == nil || seen[e.Handoff.ID] {
			continue
		}
		seen[e.Handoff.ID] = true
		d, err := h.app.Handoffs.Get(ctx, s.Agent, proj, e.Handoff.ID)
		if err != nil {
			return h.fail(c, err)
		}
		v.Handoffs = append(v.Handoffs, chainView{H: d, Ancestors: d.Ancestors, Descendants: d.Descendants})
	}
	var agents []string
	for _, e := range entries {
		agents = append(agents, e.Agent)
	}
	for _, ch := range v.Handoffs {
		agents = append(agents, ch.H.CreatedBy)
	}
	if err := h.nameAgents(c, agents...); err != nil {
		return h.fail(c, err)
	}
	return h.render(c, http.StatusOK, "task", "Task "+task, proj, v)
}
