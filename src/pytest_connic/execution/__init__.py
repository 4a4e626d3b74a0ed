"""One case: resolution, its runs (concurrent, bounded), builders, the threshold verdict and early stop."""
