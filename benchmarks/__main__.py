"""Entry point of ``python -m benchmarks``."""

from .runner import main

raise SystemExit(main())
