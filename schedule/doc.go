// Package schedule parses cronlock's schedule expressions and computes
// their fire times: 5- and 6-field cron expressions (a 6th field is leading
// seconds, not a trailing year), the crontab(5) macros, "@every D" aligned
// to the Unix epoch, CRON_TZ=/TZ= prefixes, and the DST rules of Debian
// cron(8) and cronie (see Next).
//
// The field parser and the matcher Next runs on are cronlock's own, not
// github.com/hashicorp/cronexpr's, because of cronexpr's defects:
//
//   - Expression.Next mutates the expression, a data race when several
//     goroutines share a schedule, and allocates on every call;
//   - Next finds nothing after 2099;
//   - 7 is not Sunday at the end of a range: 5-7 and SAT-SUN miss Sunday,
//     and a day-of-week step of 7 is rejected;
//   - day-of-month and day-of-week are always ORed, where cronie ANDs them
//     if either field starts with "*" (crontab(5), cronie entry.c);
//   - a reversed range (30-10, dec-jan) parses, then never fires or panics
//     in Next.
//
// cronlock rejects reversed ranges, and expressions that never fire, at
// parse time. Otherwise its field syntax is cronexpr's, and cronexpr has
// one role, in the tests only: diff_test.go uses it as the oracle for the
// syntax (the field parser accepts what cronexpr accepts, item by item,
// apart from the differences listed there) and for fire times where
// cronexpr is right. The daemon does not link it: a run-time gate that
// re-parsed every schedule with cronexpr could only fail where the oracle
// test fails, and needed a package-level cache to be cheap.
//
// Next is a pure function of an instant and the schedule's zone; callers
// compute the next slot from the previous slot, not from "now".
package schedule
