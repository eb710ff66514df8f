//! TODO(helper): the step dependency graph (depends_on + references), cycles, reachability.
