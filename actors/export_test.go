package actors

// MustSchedule is mustSchedule for the external tests (package actors_test).
var MustSchedule = mustSchedule
