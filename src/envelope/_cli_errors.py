"""The command line's one error: ``CliError``, in a module of its own.

``envelope.cli`` raises it and prints it; the benchmark engine in the checkout's
``benchmarks/`` (which ``envelope bench`` imports) raises it too. Kept apart so the two
do not import each other (issue 28 §3): each imports this module, which imports nothing.
"""

from __future__ import annotations

__all__ = ["CliError"]


class CliError(Exception):
    """A failure the command line reports on one line of stderr (spec/cli.md C2).

    ``str(err)`` is ``WHERE: error: WHAT`` and, when there is advice, ``; WHAT TO DO``.

    Attributes:
        where: the input, the output or the command the error is about.
        what: what went wrong.
        todo: what the user can do about it ("" when nothing useful can be said).
    """

    def __init__(self, where: str, what: str, todo: str = "") -> None:
        super().__init__(where, what, todo)
        self.where = where
        self.what = what
        self.todo = todo

    def __str__(self) -> str:
        text = f"{self.where}: error: {self.what}"
        return f"{text}; {self.todo}" if self.todo else text
