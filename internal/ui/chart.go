package ui

import "time"

// chart is a bar chart of uses per day, drawn as inline SVG by the
// "chart" template: one bar per day from the first use to the last (at
// most chartDays, the latest), empty days included.
type chart struct {
	Bars          []bar
	Width, Height float64
	Max, Total    int
	From, To      string
}

type bar struct {
	X, Y, W, H float64
	Day        string
	N          int
}

// The chart's geometry (SVG user units) and its longest span.
const (
	chartDays   = 90
	chartHeight = 60
	barWidth    = 8
)

// usesPerDay charts times by UTC day; nil when there are none.
func usesPerDay(times []time.Time) *chart {
	if len(times) == 0 {
		return nil
	}
	day := func(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }
	first, last := day(times[0]), day(times[0])
	counts := map[time.Time]int{}
	for _, t := range times {
		d := day(t)
		counts[d]++
		if d.Before(first) {
			first = d
		}
		if d.After(last) {
			last = d
		}
	}
	if days := int(last.Sub(first).Hours()/24) + 1; days > chartDays {
		first = last.AddDate(0, 0, -(chartDays - 1))
	}
	c := &chart{Height: chartHeight, From: first.Format("2006-01-02"), To: last.Format("2006-01-02")}
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		c.Max = max(c.Max, counts[d])
		c.Total += counts[d]
	}
	i := 0
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		n := counts[d]
		h := 0.0
		if c.Max > 0 {
			h = float64(chartHeight-4) * float64(n) / float64(c.Max)
		}
		c.Bars = append(c.Bars, bar{X: float64(i * barWidth), Y: chartHeight - h, W: barWidth - 1, H: h, Day: d.Format("2006-01-02"), N: n})
		i++
	}
	c.Width = float64(max(i*barWidth, 2*barWidth))
	return c
}
