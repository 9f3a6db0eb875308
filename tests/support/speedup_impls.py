"""The pure-Python and (when built) compiled implementations of the consume hot paths, as
pytest parameters, so that the same tests run against both.

The compiled one is required when ``TUBEMQ_AIO_EXPECT_SPEEDUPS`` is set (``make test``):
``test_speedups.py`` then fails loudly if it is missing. Without that variable a checkout
without the extension tests the pure code only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from tubemq_aio import accelerator
from tubemq_aio.consumer import _decode
from tubemq_aio.models import Message
from tubemq_aio.protocol import consumer_replies, message
from tubemq_aio.protocol.consumer_meta import META_VALUE_UNDEFINED
from tubemq_aio.protocol.framing import FrameDecoder, FrameSplitter


def loaded() -> ModuleType | None:
    """The compiled module if it is built, whatever ``TUBEMQ_AIO_PURE`` says."""
    try:
        from tubemq_aio._speedups import _cdecode
    except ImportError:
        return None
    return _cdecode


EXT = loaded()

DecoderFactory = Callable[..., FrameSplitter]
Parser = Callable[[bytes], consumer_replies.GetMessageResponse]
RawDecode = Callable[..., tuple[list[Message], int]]


def _params(pure: object, make_compiled: Callable[[ModuleType], object]) -> list[Any]:
    params = [pytest.param(pure, id="pure")]
    if EXT is not None:
        params.append(pytest.param(make_compiled(EXT), id="compiled"))
    return params


def pure_and_compiled(pure: object, name: str) -> list[Any]:
    """``pure`` and the compiled module's ``name`` (when it is built and has it), as pytest
    parameters ``pure`` and ``compiled``."""
    params = [pytest.param(pure, id="pure")]
    if EXT is not None and hasattr(EXT, name):
        params.append(pytest.param(getattr(EXT, name), id="compiled"))
    return params


def _parser(ext: ModuleType) -> Parser:
    parser: Parser = ext.GetMessageParser(
        consumer_replies.GetMessageResponse,
        consumer_replies.RawMessage,
        consumer_replies.parse_get_message_response_py,
        META_VALUE_UNDEFINED,
    )
    return parser


def _raw_decoder(ext: ModuleType) -> RawDecode:
    decoder: RawDecode = ext.RawDecoder(
        Message,
        message.crc32,
        _decode.attribute_cache,
        _decode.attribute_info,
        _decode.NO_ATTRIBUTES,
        logging.getLogger("tubemq_aio.consumer"),
        _decode.decode_raw_messages_py,
    )
    return decoder


#: Frame decoder classes (constructor arguments as :class:`FrameDecoder`'s).
FRAME_DECODERS = _params(FrameDecoder, lambda ext: ext.FrameDecoder)
#: ``parse_get_message_response`` implementations.
PARSERS = _params(consumer_replies.parse_get_message_response_py, _parser)
#: ``decode_raw_messages`` implementations.
RAW_DECODERS = _params(_decode.decode_raw_messages_py, _raw_decoder)

__all__ = [
    "EXT",
    "FRAME_DECODERS",
    "PARSERS",
    "RAW_DECODERS",
    "accelerator",
    "loaded",
    "pure_and_compiled",
]
