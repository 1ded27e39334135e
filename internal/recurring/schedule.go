// Package recurring holds recurring invoices: series that issue an
// invoice on a schedule (Schedule), their storage and the loop that issues
// their due occurrences through invoice.
//
// It owns the tables recurring_invoices (a series, its lines as JSON) and
// recurring_occurrences (one row per occurrence handled: issued or
// skipped).
package recurring

import (
	"time"
)

// Interval is the unit a series repeats by.
type Interval string

// The intervals.
const (
	Week  Interval = "week"
	Month Interval = "month"
	Year  Interval = "year"
)

// Schedule is when a series issues: StartOn, then every Count Intervals
// from it, until EndAfter occurrences or the last one on or before EndOn
// (each nil: no such end). Dates are civil days, held as midnight UTC.
type Schedule struct {
	StartOn  time.Time
	Interval Interval
	Count    int
	EndAfter *int
	EndOn    *time.Time
}

// On is the day of occurrence n (0 is StartOn), and whether the series
// has it. Every occurrence is computed from StartOn, never from the one
// before, so a month without StartOn's day uses its last day and the next
// month has the day again (Jan 31 → Feb 28 or 29 → Mar 31).
func (s Schedule) On(n int) (time.Time, bool) {
	if n < 0 || s.EndAfter != nil && n >= *s.EndAfter {
		return time.Time{}, false
	}
	y, m, d := s.StartOn.Date()
	var day time.Time
	switch s.Interval {
	case Week:
		day = time.Date(y, m, d+7*s.Count*n, 0, 0, 0, 0, time.UTC)
	case Month:
		day = monthDay(y, int(m)-1+s.Count*n, d)
	case Year:
		day = monthDay(y+s.Count*n, int(m)-1, d)
	default:
		return time.Time{}, false
	}
	if s.EndOn != nil && day.After(*s.EndOn) {
		return time.Time{}, false
	}
	return day, true
}

// monthDay is day d of the month months after January of year y (months
// may exceed 11), or that month's last day when it is shorter.
func monthDay(y, months, d int) time.Time {
	first := time.Date(y, time.Month(months+1), 1, 0, 0, 0, 0, time.UTC)
	last := first.AddDate(0, 1, -1).Day()
	return first.AddDate(0, 0, min(d, last)-1)
}

// Upcoming are the days of up to k occurrences from n on.
func (s Schedule) Upcoming(n, k int) []time.Time {
	out := []time.Time{}
	for i := n; i < n+k; i++ {
		day, ok := s.On(i)
		if !ok {
			break
		}
		out = append(out, day)
	}
	return out
}

// DueAt is when an occurrence on day is due: 00:00 of that day in loc.
func DueAt(day time.Time, loc *time.Location) time.Time {
	y, m, d := day.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// Today is the civil day t falls on in loc.
func Today(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
