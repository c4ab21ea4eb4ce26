// Package actors holds cronlock's actors (docs/architecture.md): the
// ticker (one timer over a heap of next fire times), one job actor per job
// (owns its overlap state and starts every run of the job, whatever its
// trigger), the Lease handle of each claimed run (renews every TTL/3,
// reports loss, releases), the hook runner (fan-in of run results:
// metrics, hooks), the janitor (leases whose claim or release timed out),
// and the messages they exchange. The protocol's types (the Locker
// backend interface, claims, records, skip reasons) are package ledger's.
//
// Every actor has a Run(ctx) method that returns only when it has fully
// stopped; constructors do no I/O and start no goroutines.
package actors
