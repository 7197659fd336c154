import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from sandbox_service import jail  # noqa: E402


@pytest.fixture(autouse=True)
def needs_the_jail():
    support = jail.support()
    if support.landlock_abi < 1 or not support.seccomp:
        why = f"the jail needs Landlock (Linux 5.13+) and x86-64 seccomp, and this machine has {support}"
        if os.environ.get("CI"):
            pytest.fail(why)  # CI's machines have both: a missing piece there is a regression, never a skip
        pytest.skip(why)
