"""The ``trace`` family: every crash state a real filesystem allows, built from the system calls a
stdio subject made beneath strace, each checked against SPEC-DECISIONS D3
(conformance/CRASH-STATES.md).

- :mod:`conformance.trace.strace` runs strace and reads its output;
- :mod:`conformance.trace.calls` turns the calls under the store root into the models' calls;
- :mod:`conformance.trace.persistence` replays them on a disk that keeps what is durable and what
  is pending;
- :mod:`conformance.trace.states` is the two persistence models: the crash states each builds;
- :mod:`conformance.trace.specread` reads a state's log with the spec's own reader;
- :mod:`conformance.trace.run` drives the subject processes;
- :mod:`conformance.trace.workloads` is what the subject is asked beneath strace;
- :mod:`conformance.trace.family` runs the workloads and judges every state;
- :mod:`conformance.trace.summary` turns what was found into the family's cases.

The family is opt-in (``python -m conformance --stdio CMD --trace-crashes``, or ``--families
trace``): it needs strace and takes longer than the rest of a run.
"""
