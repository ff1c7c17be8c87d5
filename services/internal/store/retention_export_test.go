package store

// PruneCandidatesSQL is the candidate scan of PruneFinished, for EXPLAIN.
const PruneCandidatesSQL = pruneCandidatesSQL
