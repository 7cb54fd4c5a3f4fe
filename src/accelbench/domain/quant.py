"""One quantization vocabulary for specs, the planner, the guards and the runtimes.

Every spelling a user may write maps to one canonical name through one alias table:
``none``/``native``/``bf16`` (serve the checkpoint's own precision), ``fp16``, ``fp8``, ``int8`` (also ``w8a8``),
``int4`` (also ``w4a8``, ``w4a16``), and the methods of checkpoints that are already quantized (``awq``,
``gptq``, ``compressed-tensors``). ``auto`` or nothing leaves the choice to the planner.

Two readings of the same table: the planner's (``parse_quantization``), which tells "automatic" (None) from
"the checkpoint as it is" (``native``), and the runtimes' (``runtime_quantization``), which keep ``bf16`` and
``fp16`` apart because they become different ``--dtype`` flags on a GPU.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from accelbench.errors import UserInputError

#: spelling -> canonical name (None: automatic)
QUANT_ALIASES: dict[str, str | None] = {
    "": None,
    "auto": None,
    "none": "native",
    "native": "native",
    "bf16": "native",
    "bfloat16": "native",
    "fp16": "fp16",
    "float16": "fp16",
    "fp8": "fp8",
    "int8": "int8",
    "w8a8": "int8",
    "int4": "int4",
    "w4a8": "int4",
    "w4a16": "int4",
    "awq": "awq",
    "gptq": "gptq",
    "compressed-tensors": "compressed-tensors",
}

ACCEPTED = "auto, none (or bf16), fp16, fp8, int8 (w8a8), int4 (w4a8, w4a16), awq, gptq, compressed-tensors"


def parse_quantization(value: str | None) -> str | None:
    """The canonical name: None (automatic), 'native', 'fp16', 'fp8', 'int8', 'int4', or a checkpoint method.
    An unknown spelling is a ``UserInputError`` listing the accepted ones."""
    if value is None:
        return None
    key = value.strip().lower()
    if key not in QUANT_ALIASES:
        raise UserInputError(
            f"Unknown quantization {value!r}.",
            hint=f"Use one of: {ACCEPTED} (awq / gptq / compressed-tensors for a checkpoint that is already "
            "quantized).",
        )
    return QUANT_ALIASES[key]


def runtime_quantization(value: str | None) -> str | None:
    """What a runtime acts on: None to serve the checkpoint as it is, 'bf16'/'fp16' for a dtype, else the
    canonical name. An unknown spelling comes back lower-cased, for the runtime's own validation to refuse."""
    if value is None:
        return None
    key = value.strip().lower()
    if key in ("bf16", "bfloat16"):
        return "bf16"
    if key not in QUANT_ALIASES:
        return key
    canonical = QUANT_ALIASES[key]
    return None if canonical in (None, "native") else canonical


def check_quantization(value: str | None) -> str | None:
    """For a spec field: the value as written when its spelling is known, else ``ValueError``."""
    if value is not None and value.strip().lower() not in QUANT_ALIASES:
        raise ValueError(f"unknown quantization {value!r}; use one of: {ACCEPTED}")
    return value


#: The type of a quantization a spec or a query names: a known spelling, kept as written (``check_quantization``)
QuantizationName = Annotated[str | None, AfterValidator(check_quantization)]
