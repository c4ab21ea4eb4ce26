package web

import (
	"fmt"
	"html/template"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Timeline geometry, in SVG user units.
const (
	tlWidth, tlHeight = 900, 180
	tlLeft, tlRight   = 56, 8
	tlTop, tlBottom   = 10, 22
	tlMarker          = 5 // height of the mark of an occurrence that did not run
)

// timeline draws occurrences (newest first, as listed) as an SVG chart,
// oldest on the left: per occurrence a bar of its start delay (grey) and
// above it one of its duration, coloured by its result (CSS classes of
// assets/style.css); one that did not run is a short mark on the axis.
// Each mark links to the occurrence's run page and has a tooltip. Every
// text is escaped: the result is safe to put in a page as is.
func timeline(occ []occRow, now time.Time) template.HTML {
	if len(occ) == 0 {
		return ""
	}
	rows := slices.Clone(occ)
	slices.Reverse(rows)
	top := time.Second
	for _, o := range rows {
		top = max(top, max(o.Delay, 0)+o.Dur)
	}
	plotH := float64(tlHeight - tlTop - tlBottom)
	y := func(d time.Duration) float64 { return float64(tlHeight-tlBottom) - plotH*float64(d)/float64(top) }
	step := float64(tlWidth-tlLeft-tlRight) / float64(len(rows))
	barW := min(max(step*0.7, 1), 24)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" viewBox="0 0 %d %d" role="img" aria-label="start delay and duration of the last %d occurrences">`,
		tlWidth, tlHeight, len(rows))
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, tlLeft, tlHeight-tlBottom, tlWidth-tlRight, tlHeight-tlBottom)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, tlLeft, tlTop, tlLeft, tlHeight-tlBottom)
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, tlLeft-4, tlTop+8, template.HTMLEscapeString(roundDur(top)))
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">0</text>`, tlLeft-4, tlHeight-tlBottom)
	for i, o := range rows {
		x := float64(tlLeft) + float64(i)*step + (step-barW)/2
		title := template.HTMLEscapeString(fmt.Sprintf("%s: %s (start delay %s)", o.At.Format("2006-01-02 15:04:05 MST"), o.Answer, roundDur(o.Delay)))
		fmt.Fprintf(&b, `<a href="%s"><title>%s</title>`, template.HTMLEscapeString("runs/"+url.PathEscape(o.ID)), title)
		if o.Started == 0 {
			fmt.Fprintf(&b, `<rect class="bar %s" x="%.1f" y="%d" width="%.1f" height="%d"/>`,
				template.HTMLEscapeString(o.Class), x, tlHeight-tlBottom-tlMarker, barW, tlMarker)
		} else {
			d := max(o.Delay, 0)
			if d > 0 {
				fmt.Fprintf(&b, `<rect class="bar delay" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x, y(d), barW, max(y(0)-y(d), 0.5))
			}
			fmt.Fprintf(&b, `<rect class="bar %s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`,
				template.HTMLEscapeString(o.Class), x, y(d+o.Dur), barW, max(y(d)-y(d+o.Dur), 1))
		}
		b.WriteString(`</a>`)
	}
	first, last := rows[0].At, rows[len(rows)-1].At
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d">%s</text>`, tlLeft, tlHeight-6, template.HTMLEscapeString(ago(now, first)))
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, tlWidth-tlRight, tlHeight-6,
		template.HTMLEscapeString(ago(now, last)))
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built above, every text escaped
}
