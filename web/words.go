package web

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cronlock/cronlock/schedule"
)

// describe says a schedule in words, in its zone: "at 02:30 every day
// (Europe/Paris)". Common shapes get a sentence; the rest a field-by-field
// reading ("minute 0-30/5, hour 9-17, weekday MON-FRI"). It never fails:
// the expression was validated when the configuration was read.
func describe(s *schedule.Schedule, expr string) string {
	zone := ""
	if s != nil && s.Location() != nil {
		zone = " (" + s.Location().String() + ")"
	}
	expr = strings.TrimSpace(expr)
	if strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "TZ=") {
		if _, rest, ok := strings.Cut(expr, " "); ok {
			expr = strings.TrimSpace(rest)
		}
	}
	if strings.HasPrefix(expr, "@") {
		return describeMacro(s, expr) + zone
	}
	f := strings.Fields(expr)
	if len(f) == 5 {
		f = append([]string{"0"}, f...)
	}
	if len(f) != 6 {
		return expr + zone
	}
	return describeFields(f[0], f[1], f[2], f[3], f[4], f[5]) + zone
}

// macros are the @ shorthands in words.
var macros = map[string]string{
	"@yearly": "at 00:00 on 1 January", "@annually": "at 00:00 on 1 January", "@monthly": "at 00:00 on day 1 of every month",
	"@weekly": "at 00:00 every Sunday", "@daily": "at 00:00 every day", "@midnight": "at 00:00 every day",
	"@hourly": "at minute 0 of every hour",
}

// describeMacro says an @ schedule in words.
func describeMacro(s *schedule.Schedule, expr string) string {
	name, arg, _ := strings.Cut(expr, " ")
	switch {
	case macros[name] != "":
		return macros[name]
	case name == "@every":
		return "every " + strings.TrimSpace(arg) + ", aligned to the clock"
	case name == "@at" && s != nil:
		if t, ok := s.Once(); ok {
			return "once, at " + t.Format("2006-01-02 15:04:05")
		}
	}
	return expr
}

// weekdays and months name the cron numbers.
var (
	weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
	months   = []string{"", "January", "February", "March", "April", "May", "June", "July", "August", "September",
		"October", "November", "December"}
)

// describeFields says six cron fields in words.
func describeFields(sec, min, hour, dom, mon, dow string) string {
	var when string
	n, isNum := num(sec), num(min) >= 0 && num(hour) >= 0
	switch {
	case sec == "*" && min == "*" && hour == "*":
		when = "every second"
	case strings.HasPrefix(sec, "*/") && min == "*" && hour == "*":
		when = "every " + sec[2:] + " seconds"
	case n != 0 && min == "*" && hour == "*":
		when = "at second " + sec + " of every minute"
	case n == 0 && min == "*" && hour == "*":
		when = "every minute"
	case n == 0 && strings.HasPrefix(min, "*/") && hour == "*":
		when = "every " + min[2:] + " minutes"
	case n == 0 && num(min) >= 0 && hour == "*":
		when = "at minute " + min + " of every hour"
	case n >= 0 && isNum:
		when = fmt.Sprintf("at %02d:%02d", num(hour), num(min))
		if n > 0 {
			when += fmt.Sprintf(":%02d", n)
		}
	default:
		when = "at second " + sec + ", minute " + min + ", hour " + hour
		if n == 0 {
			when = "at minute " + min + ", hour " + hour
		}
	}
	days := dayWords(dom, dow)
	if days == " every day" && !(n >= 0 && isNum) {
		days = "" // "every 10 minutes", not "every 10 minutes every day"
	}
	if mon != "*" {
		if m := num(mon); m >= 1 && m <= 12 {
			days += " in " + months[m]
		} else {
			days += " in month " + mon
		}
	}
	return when + days
}

// dayWords says the day fields: " every day", " on Monday", " on day 15 of
// the month", " on day-of-month 1-7 and weekday MON".
func dayWords(dom, dow string) string {
	switch {
	case dom == "*" && dow == "*":
		return " every day"
	case dom == "*" && num(dow) >= 0 && num(dow) <= 7:
		return " every " + weekdays[num(dow)]
	case dom == "*" && (dow == "1-5" || strings.EqualFold(dow, "MON-FRI")):
		return " on weekdays (Monday to Friday)"
	case dom == "*":
		return " on weekday " + dow
	case dow == "*" && num(dom) >= 1:
		return " on day " + dom + " of the month"
	case dow == "*":
		return " on day-of-month " + dom
	}
	return " on day-of-month " + dom + " or weekday " + dow + " (either, as cron does)"
}

// num is s as a plain number, or -1.
func num(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return -1
	}
	return n
}
