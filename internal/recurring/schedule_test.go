package recurring

import (
	"testing"
	"time"
)

func day(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestScheduleDays compares a series' issue days with a table written by
// hand from a calendar.
func TestScheduleDays(t *testing.T) {
	three := 3
	endOn := day("2027-05-15")
	cases := []struct {
		name string
		s    Schedule
		want []string
	}{
		{"monthly from Jan 31 of a leap year", Schedule{StartOn: day("2028-01-31"), Interval: Month, Count: 1},
			[]string{"2028-01-31", "2028-02-29", "2028-03-31", "2028-04-30", "2028-05-31", "2028-06-30", "2028-07-31"}},
		{"monthly from Jan 31 of a common year", Schedule{StartOn: day("2027-01-31"), Interval: Month, Count: 1},
			[]string{"2027-01-31", "2027-02-28", "2027-03-31", "2027-04-30", "2027-05-31"}},
		{"monthly from Jan 30 of a leap year", Schedule{StartOn: day("2028-01-30"), Interval: Month, Count: 1},
			[]string{"2028-01-30", "2028-02-29", "2028-03-30", "2028-04-30"}},
		{"monthly from Jan 30 of a common year", Schedule{StartOn: day("2027-01-30"), Interval: Month, Count: 1},
			[]string{"2027-01-30", "2027-02-28", "2027-03-30", "2027-04-30"}},
		{"monthly from Jan 29 of a leap year", Schedule{StartOn: day("2028-01-29"), Interval: Month, Count: 1},
			[]string{"2028-01-29", "2028-02-29", "2028-03-29"}},
		{"monthly from Jan 29 of a common year", Schedule{StartOn: day("2027-01-29"), Interval: Month, Count: 1},
			[]string{"2027-01-29", "2027-02-28", "2027-03-29"}},
		{"every 3 months from Nov 30, across a year", Schedule{StartOn: day("2027-11-30"), Interval: Month, Count: 3},
			[]string{"2027-11-30", "2028-02-29", "2028-05-30", "2028-08-30", "2028-11-30", "2029-02-28"}},
		{"every 12 months from Jan 31", Schedule{StartOn: day("2027-01-31"), Interval: Month, Count: 12},
			[]string{"2027-01-31", "2028-01-31", "2029-01-31"}},
		{"weekly across the end of a leap February", Schedule{StartOn: day("2028-02-15"), Interval: Week, Count: 1},
			[]string{"2028-02-15", "2028-02-22", "2028-02-29", "2028-03-07", "2028-03-14"}},
		{"every 2 weeks across a year", Schedule{StartOn: day("2027-12-20"), Interval: Week, Count: 2},
			[]string{"2027-12-20", "2028-01-03", "2028-01-17"}},
		{"yearly from Feb 29", Schedule{StartOn: day("2028-02-29"), Interval: Year, Count: 1},
			[]string{"2028-02-29", "2029-02-28", "2030-02-28", "2031-02-28", "2032-02-29", "2033-02-28"}},
		{"every 4 years from Feb 29", Schedule{StartOn: day("2028-02-29"), Interval: Year, Count: 4},
			[]string{"2028-02-29", "2032-02-29", "2036-02-29"}},
		{"ended after 3", Schedule{StartOn: day("2027-01-31"), Interval: Month, Count: 1, EndAfter: &three},
			[]string{"2027-01-31", "2027-02-28", "2027-03-31"}},
		{"ended on May 15: its last is on or before", Schedule{StartOn: day("2027-01-15"), Interval: Month, Count: 2, EndOn: &endOn},
			[]string{"2027-01-15", "2027-03-15", "2027-05-15"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for n := 0; n < 20; n++ {
				d, ok := c.s.On(n)
				if !ok {
					break
				}
				got = append(got, d.Format(time.DateOnly))
			}
			if c.s.EndAfter == nil && c.s.EndOn == nil {
				got = got[:len(c.want)]
			}
			if len(got) != len(c.want) {
				t.Fatalf("days %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("occurrence %d on %s, want %s (all: %v)", i, got[i], c.want[i], got)
				}
			}
		})
	}
}

func TestUpcomingStopsAtTheEnd(t *testing.T) {
	two := 2
	s := Schedule{StartOn: day("2027-01-31"), Interval: Month, Count: 1, EndAfter: &two}
	if got := s.Upcoming(1, 3); len(got) != 1 || !got[0].Equal(day("2027-02-28")) {
		t.Fatalf("upcoming from the second of two: %v", got)
	}
	if got := s.Upcoming(2, 3); len(got) != 0 {
		t.Fatalf("upcoming once ended: %v", got)
	}
}

// TestDueAcrossDaylightSaving: a weekly series is due at 00:00 of its day
// in the location's zone, before and after the clocks change there (US
// Eastern: 2027-03-14, 2027-11-07), so 7 days apart is 167 or 169 hours.
func TestDueAcrossDaylightSaving(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	s := Schedule{StartOn: day("2027-03-08"), Interval: Week, Count: 1}
	want := []string{"2027-03-08T05:00:00Z", "2027-03-15T04:00:00Z", "2027-03-22T04:00:00Z"}
	for n, w := range want {
		d, _ := s.On(n)
		if got := DueAt(d, ny).UTC().Format(time.RFC3339); got != w {
			t.Fatalf("occurrence %d due %s, want %s", n, got, w)
		}
	}
	fall := Schedule{StartOn: day("2027-11-01"), Interval: Week, Count: 1}
	d0, _ := fall.On(0)
	d1, _ := fall.On(1)
	if gap := DueAt(d1, ny).Sub(DueAt(d0, ny)); gap != 169*time.Hour {
		t.Fatalf("due 7 days apart across the fall change: %v, want 169h", gap)
	}
	// Today is the location's day: 03:30 UTC on Mar 15 is still Mar 14 in New York.
	if got := Today(time.Date(2027, 3, 15, 3, 30, 0, 0, time.UTC), ny); !got.Equal(day("2027-03-14")) {
		t.Fatalf("today in New York: %v", got)
	}
}
