package assemble

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/ctxtype"
)

// admit runs the stages of Assemble on one candidate that fired, in their
// order of precedence (overrides, visibility, templates, contradictions),
// and reports whether it goes on to ranking.
func (b *bounded) admit(ctx context.Context, c *cand) (bool, error) {
	ok, err := b.early(ctx, c)
	if err != nil || !ok {
		return false, err
	}
	if sk := c.v.StateKey; sk != "" {
		if err := b.resolveGroup(ctx, sk); err != nil {
			return false, err
		}
		if c.loserOf != nil {
			return false, nil
		}
	}
	c.handled = true
	return !b.p.ablated(c), nil
}

// early runs the stages before contradictions on a candidate, once (the
// role policy's kinds among them, policy.go): a
// candidate met in rank order and the same one judged earlier as the
// contender of a state key get one judgement and at most one record.
func (b *bounded) early(ctx context.Context, c *cand) (bool, error) {
	if c.earlyDone {
		return c.earlyOK, nil
	}
	c.earlyDone = true
	p := b.p
	if c.v.Project == ctxtype.SharedProject {
		if err := b.readShadows(ctx, []string{c.v.Key}); err != nil {
			return false, err
		}
		if over := b.shadows[c.v.Key]; over != nil {
			p.exclude(c, ctxtype.ReasonOverridden, fmt.Sprintf("overridden by project item %s v%d", over.Key, over.Version),
				!c.v.Roles.Visible(p.req.TargetRole))
			c.handled = true
			return false, nil
		}
	}
	if !c.v.Roles.Visible(p.req.TargetRole) {
		p.exclude(c, ctxtype.ReasonHidden, fmt.Sprintf("not visible to role %q (visible_to %v, hidden_from %v)",
			p.req.TargetRole, c.v.Roles.VisibleTo, c.v.Roles.HiddenFrom), true)
		c.handled = true
		return false, nil
	}
	if p.kindLeftOut(c) {
		return false, nil
	}
	if c.v.Template {
		if err := b.texts(ctx, []*cand{c}); err != nil {
			return false, err
		}
		if missing := p.fill(c); len(missing) > 0 {
			p.exclude(c, ctxtype.ReasonTemplateUnresolved, "no value for "+strings.Join(missing, ", "), false)
			c.handled = true
			return false, nil
		}
	}
	c.earlyOK = true
	return true, nil
}

// resolveGroup is the contradictions stage for one state key: of the
// contenders that fire and pass the earlier stages, the strongest goes on
// to ranking and the others with other content become its losers,
// recorded as contradicted whether or not the budget reaches them.
func (b *bounded) resolveGroup(ctx context.Context, sk string) error {
	if done, read := b.groups[sk]; done {
		return nil
	} else if !read {
		shared, err := b.readGroupRows(ctx, []string{sk})
		if err != nil {
			return err
		}
		if err := b.readShadows(ctx, shared); err != nil {
			return err
		}
	}
	b.groups[sk] = true
	var group []*cand
	for _, c := range b.reg {
		if c.v.StateKey == sk && b.fires(c) {
			group = append(group, c)
		}
	}
	slices.SortFunc(group, func(x, y *cand) int { return strings.Compare(x.v.Key+"\x00"+x.v.Project, y.v.Key+"\x00"+y.v.Project) })
	var contenders []*cand
	for _, c := range group {
		ok, err := b.early(ctx, c)
		if err != nil {
			return err
		}
		if ok {
			contenders = append(contenders, c)
		}
	}
	if len(contenders) < 2 {
		return nil
	}
	slices.SortFunc(contenders, stronger)
	winner := contenders[0]
	for _, c := range contenders[1:] {
		same, err := b.sameContent(ctx, c, winner)
		if err != nil {
			return err
		}
		if same {
			continue
		}
		c.loserOf = winner
		winner.losers = append(winner.losers, c)
		c.handled = true
		b.p.losers = append(b.p.losers, c)
	}
	if len(winner.losers) > 0 && b.p.in.render() >= Render2 {
		// The pair lines quote both facts: read their text now, in one trip.
		return b.texts(ctx, append([]*cand{winner}, winner.losers...))
	}
	return nil
}

// fires reports whether a contender fires: the items of the request's
// lanes do, any other only when a small lane fired it.
func (b *bounded) fires(c *cand) bool {
	if c.small {
		return true
	}
	for _, s := range b.streams {
		if b.inLane(s, c.v) && ValidAt(c.v, b.p.in.Now) {
			if c.rule == "" {
				c.rule, _ = b.p.fire(c.v, nil, false)
			}
			return true
		}
	}
	return false
}

// firesAlone reports whether v's own trigger fires (no pin, no relevance).
func (b *bounded) firesAlone(v *ctxtype.Version) bool {
	if t := v.Trigger; !t.Always && t.Keywords != nil && !IsContextPacket(v.Key) {
		// The keyword lane's count asks this of every item it has not
		// tried: without the rule fire would write (fmt, a quarter of the
		// count's time at 100,000 items).
		_, _, at := b.p.keywordMatch(t)
		return at >= 0
	}
	_, ok := b.p.fire(v, nil, false)
	return ok
}

// sameContent is agreement: the same content is no contradiction.
func (b *bounded) sameContent(ctx context.Context, x, y *cand) (bool, error) {
	if !x.v.Template && !y.v.Template {
		return x.v.ContentSHA256 == y.v.ContentSHA256, nil
	}
	if err := b.texts(ctx, []*cand{x, y}); err != nil {
		return false, err
	}
	return x.content == y.content, nil
}
