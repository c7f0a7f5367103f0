"""Reading a file whole, with its size bounded before a byte is read.

A file the CLI reads whole (a scenario, a user pricing file) is checked
against its bound by ``fstat`` on the open file and then read with a hard cap,
so a 50 MB file is refused at once rather than read, decoded and parsed first,
and a file that grows between the check and the read is still refused.
"""

from __future__ import annotations

import os


class FileTooLarge(ValueError):
    """A file over its size bound; the message gives the size and the bound."""


def read_bounded(path: str | os.PathLike[str], limit: int, *, what: str) -> bytes:
    """The bytes of ``path`` if it holds at most ``limit`` bytes; :class:`FileTooLarge` otherwise.

    ``what`` names the file's kind in the refusal ("a scenario file"). OS errors
    (missing file, a directory, no permission) propagate unchanged.
    """
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > limit:
            raise FileTooLarge(f"{size} bytes is above the bound of {limit} bytes for {what}; nothing was read")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(f"more than {limit} bytes, above the bound for {what}; refused")
    return data
