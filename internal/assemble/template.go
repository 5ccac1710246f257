package assemble

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/render"
)

var placeholderRE = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}`)

// templates is the filling stage: every candidate gets the title and
// content it will show, and a template with a placeholder nothing fills is
// left out, since a half-filled text would mislead the agent.
func (p *pipeline) templates() {
	kept := p.cands[:0]
	for _, c := range p.cands {
		c.title, c.content = c.v.Title, c.v.Content
		if c.v.Template {
			if p.vars == nil {
				p.vars = templateVars(p.in, p.req)
			}
			var missing []string
			c.title, missing = fillTemplate(c.v.Title, p.vars, missing)
			c.content, missing = fillTemplate(c.v.Content, p.vars, missing)
			if len(missing) > 0 {
				p.exclude(c, ctxtype.ReasonTemplateUnresolved, "no value for "+strings.Join(missing, ", "), false)
				continue
			}
		}
		kept = append(kept, c)
	}
	p.cands = kept
}

// templateVars returns the values placeholders may take: the closed set of
// built-ins, then the request's variables. Built-ins win, so a variable
// cannot pretend to be the project or the time.
func templateVars(in Input, req *ctxtype.Request) map[string]string {
	vars := map[string]string{}
	for k, v := range req.Variables {
		switch x := v.(type) {
		case string:
			vars[k] = x
		case json.Number:
			vars[k] = render.CanonicalNumber(x)
		case bool:
			vars[k] = strconv.FormatBool(x)
		case nil:
		default:
			b, _ := json.Marshal(x)
			vars[k] = string(b)
		}
	}
	vars["project"] = in.Project
	vars["target_role"] = req.TargetRole
	vars["now"] = in.Now.UTC().Format(time.RFC3339)
	if req.Task != nil && req.Task.Objective != "" {
		vars["task.objective"] = req.Task.Objective
	} else {
		delete(vars, "task.objective")
	}
	return vars
}

// fillTemplate replaces every {{name}}; names without a value are added to
// missing, and then the text must not be used.
func fillTemplate(s string, vars map[string]string, missing []string) (string, []string) {
	out := placeholderRE.ReplaceAllStringFunc(s, func(m string) string {
		name := placeholderRE.FindStringSubmatch(m)[1]
		if v, ok := vars[name]; ok {
			return v
		}
		if !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return m
	})
	return out, missing
}
