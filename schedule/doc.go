// Package schedule is cronlock's cron layer over hashicorp/cronexpr
// (SPEC.md §3): 5- and 6-field expressions, macros, @every aligned to the
// Unix epoch, CRON_TZ=/TZ= prefixes, and Debian/cronie DST rules.
//
// cronexpr does the field parsing; this package fixes what it gets wrong
// (LIBRARY-NOTES §1): a 6th field is read as leading seconds, not a year;
// 7 is Sunday in ranges (5-7, SAT-SUN, 1-7/2); reversed ranges are errors
// instead of panics; day-of-month and day-of-week are ANDed when either
// starts with "*", as cronie does; expressions that never fire are
// rejected; and DST follows Debian cron(8) rather than cronexpr's
// skip-and-double-fire. cronexpr only validates syntax (under recover):
// Next runs on an immutable bit-set matcher, so it is lock-free,
// allocation-free and not limited to cronexpr's 1970-2099 years.
//
// Next is a pure function of an instant and the schedule's zone; callers
// compute the next slot from the previous slot, not from "now".
package schedule
