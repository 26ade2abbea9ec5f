"""Test configuration: a hypothesis profile that keeps the whole suite fast and leaves no files behind."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "larder",
    deadline=None,  # subprocesses and compressors have uneven timings
    database=None,  # no example database to keep; failures print how to reproduce them
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "larder"))
