"""How findings write their figures: ratios to one decimal ("3.1x"), times to 0.1 ms, throughputs to 0.1 tok/s,
growth to whole percents, in words ("grows 250%", "stays flat")."""

from __future__ import annotations

from accelbench.report.comparison import (
    Growth,
)


def fx(ratio: float) -> str:
    return f"{ratio:.1f}x"


def fms(value: float) -> str:
    return f"{value:,.1f} ms"


def ftps(value: float) -> str:
    return f"{value:,.1f} tok/s"


def growth_parts(g: Growth) -> tuple[str, str, str]:
    """(verb, amount, span): ("grows", "12%", "(9.0 → 10.1 ms)"); "falls" below 0; ("stays flat", "", ...)
    when the growth rounds to 0%."""
    pct = round(g.growth_pct)
    span = f"({g.from_ms:,.1f} → {g.to_ms:,.1f} ms)"
    if pct > 0:
        return "grows", f"{pct:,}%", span
    if pct < 0:
        return "falls", f"{-pct:,}%", span
    return "stays flat", "", span


def growth_phrase(g: Growth) -> str:
    """ "grows 12% (9.0 → 10.1 ms)", "falls 4% (...)" or "stays flat (...)" (rounds to 0%)."""
    verb, amount, span = growth_parts(g)
    return f"{verb} {amount} {span}" if amount else f"{verb} {span}"


def growth_figures(prefix: str, g: Growth) -> dict[str, float | int | str | None]:
    return {f"{prefix}_from_ms": g.from_ms, f"{prefix}_to_ms": g.to_ms, f"{prefix}_growth_pct": g.growth_pct}


def stream_phrase(input_len: int, concurrency: int, output_tps: float, where: str) -> str:
    """``At input 128 and concurrency 1, one request gets 64.0 tok/s of output end to end on A``: per request,
    end to end (its TTFT included), the speed one user sees, not the decode rate alone."""
    who = "one request gets" if concurrency == 1 else "each request gets"
    return (
        f"At input {input_len} and concurrency {concurrency}, {who} {ftps(output_tps)} of output end to end "
        f"on {where}"
    )
