package submitter

// Coalescing reports whether Run is serving single submissions in shared
// transactions yet.
func (s *Submitter) Coalescing() bool { return s.coalescing.Load() }
