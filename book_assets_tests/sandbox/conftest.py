"""Sandbox fixtures for these tests.

pytest only honours ``pytest_plugins`` in the root conftest, which belongs to the whole project; importing the
fixtures here works on its own and is harmless once the root conftest also registers
``book_assets.sandbox.testing``.
"""

from book_assets.sandbox.testing import sandbox, sandbox_factory

__all__ = ["sandbox", "sandbox_factory"]
