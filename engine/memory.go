package engine

import "runtime/debug"

// releaseLoadGarbage returns the memory that loading the configuration
// left behind to the operating system. It blocks for one full garbage
// collection (tens of milliseconds with 10,000 jobs).
//
// Decoding a configuration (viper's maps, the YAML or JSON nodes, the
// validation's copies) allocates several times what the loaded jobs keep.
// That garbage is dead at once, but an idle daemon allocates so little
// that the next collection (at twice the live heap of the last one) may
// not come for a long time, and until then the start-up's peak stays
// resident (measured by `make bench`, workload idle10k: README.md,
// "Performance"). It changes no GC setting: later collections run as the
// runtime decides.
func releaseLoadGarbage() { debug.FreeOSMemory() }
