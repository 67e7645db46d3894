"""The thread policy: one torch thread unless train.threads says otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from rdpgan.errors import UserInputError
from rdpgan.threads import POLICY_THREADS, apply_thread_policy, thread_policy


def test_the_policy_sets_one_thread_and_an_override_wins():
    before = torch.get_num_threads()
    try:
        assert apply_thread_policy(None) == POLICY_THREADS == torch.get_num_threads() == 1
        assert apply_thread_policy(2) == 2 == torch.get_num_threads()
        for bad in (0, -1, 1.5):
            with pytest.raises(UserInputError, match=r"train\.threads"):
                apply_thread_policy(bad)
    finally:
        torch.set_num_threads(before)


def test_a_block_under_the_policy_gives_the_callers_threads_back():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        with thread_policy(None) as count:
            assert count == POLICY_THREADS == torch.get_num_threads()
        with pytest.raises(KeyError), thread_policy(2):
            assert torch.get_num_threads() == 2
            raise KeyError("inside")
        assert torch.get_num_threads() == 3
        with pytest.raises(UserInputError, match=r"train\.threads"), thread_policy(0):
            pass
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize(("given", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_openmp_waits_passively_unless_the_user_chose(given, expected):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    probe = "import os, rdpgan, torch; print(os.environ['OMP_WAIT_POLICY'])"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.strip() == expected
