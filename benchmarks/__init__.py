"""Benchmarks of the aclnn operators against PyTorch CPU and the machine's bandwidth.

Run ``python -m benchmarks`` (``--quick`` for a smoke run, ``--only SUBSTRING`` to filter
cases, ``--repeat N``, ``--json PATH``). Layout:

- ``harness``  timing helpers, device-tensor setup, the two-phase call, targets
- ``probe``    the Numba 2-thread copy / triad bandwidth probe
- ``cases``    the case registry: name, setup, target
- ``peakmem``  the peak-memory probe, run in a fresh subprocess
- ``runner``   command line, the run loop, the table and the JSON file
"""
