"""The whole-log checker: every violation of every rule, each with a stable rule id
(SPEC-DECISIONS D9). :func:`spec.checks.log.check_log` runs the families; ``RULES`` names them."""
