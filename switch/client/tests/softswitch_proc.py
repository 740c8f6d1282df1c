"""The softswitch's one-shot dumps, for the contract tests (p4relay_testsupport)."""

from p4relay_testsupport import dump_softswitch as dump

__all__ = ["dump"]
