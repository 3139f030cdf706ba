"""The consoles the commands print through.

Why one factory: rich turns `:name:` into an emoji by default, so a user's text such as
`tiny:train:2000` printed as `tiny🚋2000`. Every command's console is made here, with emoji
codes off, so what a user wrote is printed as written.
"""

from __future__ import annotations


def console(stderr: bool = False, **options):
    from rich.console import Console

    return Console(stderr=stderr, emoji=False, **options)
