package server

import (
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/validation"
)

// limitParams refuses query and path parameters over their limits (422,
// with the parameter named), before any service reads them: a 30,000-word
// ?q= or a megabyte task_id costs nothing past this point.
func limitParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		l := limits.Get()
		max := func(name string) int {
			switch name {
			case "q":
				return l.Query
			case "task_id":
				return l.TaskID
			case "target_role":
				return l.Role
			}
			return l.Text
		}
		var errs validation.List
		for name, vals := range c.Request().URL.Query() {
			for _, v := range vals {
				limits.Chars(&errs, name, v, max(name))
			}
		}
		for i, name := range c.ParamNames() {
			if vals := c.ParamValues(); i < len(vals) {
				limits.Chars(&errs, strings.TrimPrefix(name, ":"), vals[i], max(name))
			}
		}
		if err := errs.Err(); err != nil {
			return err
		}
		return next(c)
	}
}
