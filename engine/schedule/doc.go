// Package schedule is cronlock's cron layer over hashicorp/cronexpr
// (SPEC.md §3): 5- and 6-field expressions, macros, @every aligned to the
// Unix epoch, CRON_TZ=/TZ= prefixes, and Debian/cronie DST rules.
package schedule
