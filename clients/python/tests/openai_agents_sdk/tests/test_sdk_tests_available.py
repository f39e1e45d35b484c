"""Says why the SDK's session tests beside this file did not run, when they cannot."""

import pytest


def test_the_sdk_session_tests_can_run() -> None:
    pytest.importorskip("agents", reason="openai-agents is not installed: the SDK's own session tests are skipped")
    pytest.importorskip("pytest_asyncio", reason="pytest-asyncio is not installed: the SDK's session tests need it")
