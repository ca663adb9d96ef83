"""What a model is to this package: the protocols every first stage, scorer and runner relies on.

An encoder turns texts into one embedding row per text (``encode(texts, kind="query" | "document")``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np

EncodeKind = Literal["query", "document"]


@runtime_checkable
class Encoder(Protocol):
    name: str
    revision: str

    def encode(self, texts: Sequence[str], *, kind: EncodeKind) -> np.ndarray: ...
