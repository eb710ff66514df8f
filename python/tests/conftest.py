"""The pev binary the installed wheel carries, for the tests that compare with the CLI."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def pev_bin() -> str:
    import pev

    return pev.find_pev_bin()
