"""Where user code runs: worker processes, one leased per run (docs/architecture.md, "Where user
code runs"). ``pool.py`` is pytest's side (the pool, a run's lease, the hard timeout, crashes in
words), ``worker.py`` the worker's side, ``wire.py`` what crosses between them."""
