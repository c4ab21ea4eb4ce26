// Package actors holds cronlock's actors (SPEC.md §10): the ticker (one
// timer over a heap of next fire times), one job actor per job (owns its
// overlap state), one lease actor per run (renews every TTL/3, reports
// loss), the hook runner (fan-in of run results: metrics, history, hooks)
// and the messages they exchange.
//
// Every actor has a Run(ctx) method that returns only when it has fully
// stopped; constructors do no I/O and start no goroutines (STYLE.md 1–6).
package actors
