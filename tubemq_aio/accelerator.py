"""Loader of the optional compiled accelerator: environment flags, :func:`compiled`, :func:`twin`.

The extension ``tubemq_aio._speedups._cdecode`` (Cython source ``_cdecode.pyx``) holds compiled
versions of :func:`tubemq_aio.protocol.consumer_replies.parse_get_message_response` and
:func:`tubemq_aio.consumer._decode.decode_raw_messages`, of the frame decoder, of the Spark
source's column decode (:mod:`tubemq_aio.spark._columns`), of the producer's plain send
(:func:`tubemq_aio.protocol.producer_send.plain_send_encoder`, the plain check
:func:`tubemq_aio.producer.config.plain_send_args`, the answer's envelope and parse), of a
connection's registration state (:class:`tubemq_aio._io.registry.SendRegistry`) with a call's
answer future whose wake-ups one read batches (``AnswerFutures``, used by
:func:`tubemq_aio._io.pending.future_factory` on asyncio's and uvloop's loops), of the send
window's count (:class:`tubemq_aio.producer._window.WindowSlots`), of a send attempt's two halves
(:class:`tubemq_aio.producer._fast_attempt.FastAttempt`) and of the
gateway's fetch answer encoding (:mod:`tubemq_aio.gateway.tubemq.fetched_messages`). Those
functions stay the entry points: they use the compiled version when it is built and importable,
and their own pure-Python code otherwise, with the same results and the same errors.

This loader is on the ground floor: it imports nothing of ours. The extension sits above
``protocol/`` (it imports the frame constants), so the loader finds it by name at run time, the
way a plugin is found, and ``protocol/`` asks the loader, never the extension.

The extension is built in place from a source checkout (``python -m tubemq_aio._speedups.build``;
``make venv`` does it) and is never part of the wheel, which stays pure Python. Set
``TUBEMQ_AIO_PURE=1`` to force the pure code.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, TypeVar

_Class = TypeVar("_Class", bound=type)

__all__ = ["ENV_EXPECT", "ENV_PURE", "EXTENSION", "compiled", "pure_forced", "twin", "twin_or"]

#: Set (non-empty, not ``0``) to use the pure-Python code even when the extension is built.
ENV_PURE = "TUBEMQ_AIO_PURE"
#: Set by ``make test``: the extension must be built; its test fails loudly when it is not.
ENV_EXPECT = "TUBEMQ_AIO_EXPECT_SPEEDUPS"
#: The compiled extension's module name.
EXTENSION = "tubemq_aio._speedups._cdecode"


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def pure_forced() -> bool:
    """Whether ``TUBEMQ_AIO_PURE`` asks for the pure-Python code."""
    return _flag(ENV_PURE)


def compiled() -> ModuleType | None:
    """The compiled module, or None when it is not built, cannot load, or pure code is forced.

    Returns:
        ``tubemq_aio._speedups._cdecode``, or None.
    """
    if pure_forced():
        return None
    try:
        return importlib.import_module(EXTENSION)
    except ImportError:  # not built (a wheel install), or built for another interpreter
        return None


def twin(name: str) -> Any | None:
    """The compiled class ``name``, or None when :func:`compiled` is None or the extension was
    built from an older source that lacks it (rebuild it to use it; the pure code runs meanwhile).
    """
    ext = compiled()
    return None if ext is None else getattr(ext, name, None)


def twin_or(pure: _Class) -> _Class:
    """The compiled twin of the class ``pure`` (the extension's class of the same name, with the
    same fields and methods), or ``pure`` itself when :func:`twin` finds none: what a class
    built on either subclasses.
    """
    compiled: _Class | None = twin(pure.__name__)
    return pure if compiled is None else compiled
