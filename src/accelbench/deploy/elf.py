"""The program headers of an ELF file (32- or 64-bit, either byte order), read without any tool: enough to tell
whether a library asks for an executable stack (``PT_GNU_STACK`` with ``PF_X``) and where its code is mapped
from (the executable ``PT_LOAD`` segment), for the engine fixes in ``engines`` and ``isa_fault``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PT_LOAD = 0x1
PT_GNU_STACK = 0x6474E551
PF_X = 0x1


@dataclass(frozen=True)
class ProgramHeader:
    type: int
    flags: int
    offset: int
    vaddr: int


def program_headers(path: Path) -> list[ProgramHeader] | None:
    """The file's program headers; None when it is not an ELF file or cannot be read."""
    try:
        with open(path, "rb") as fh:
            ident = fh.read(64)
            if len(ident) < 52 or ident[:4] != b"\x7fELF":
                return None
            is64 = ident[4] == 2
            order = "little" if ident[5] == 1 else "big"

            def u(data: bytes, off: int, n: int) -> int:
                return int.from_bytes(data[off : off + n], order)  # type: ignore[arg-type]

            if is64:
                phoff, phentsize, phnum = u(ident, 32, 8), u(ident, 54, 2), u(ident, 56, 2)
            else:
                phoff, phentsize, phnum = u(ident, 28, 4), u(ident, 42, 2), u(ident, 44, 2)
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
    except OSError:
        return None
    headers = []
    for i in range(phnum):
        e = table[i * phentsize : (i + 1) * phentsize]
        if len(e) < (56 if is64 else 32):
            break
        if is64:  # p_type, p_flags, p_offset, p_vaddr
            headers.append(ProgramHeader(u(e, 0, 4), u(e, 4, 4), u(e, 8, 8), u(e, 16, 8)))
        else:  # p_type, p_offset, p_vaddr, ..., p_flags
            headers.append(ProgramHeader(u(e, 0, 4), u(e, 24, 4), u(e, 4, 4), u(e, 8, 4)))
    return headers
