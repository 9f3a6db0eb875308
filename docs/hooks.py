"""mkdocs hook: show the Sphinx roles of our docstrings as plain code on the site.

The docstrings use Sphinx cross-reference roles (``:class:`X```, ``:meth:`~a.b.c```) and
``Example::`` literal-block markers, which mkdocstrings renders verbatim; this strips the role
names, shortens ``~``-prefixed paths to their last part, and drops the second colon.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|data|exc|obj|const):(?=<(?:code|a)\b)")
_TILDE = re.compile(r"<code>~(?:[\w.]+\.)?(\w+)</code>")
_LITERAL_MARK = re.compile(r"(<p>[^<]*\w)::</p>")


def on_page_content(html: str, **_: Any) -> str:
    """Rewrite one rendered page (mkdocs ``on_page_content`` event).

    Args:
        html: the page's HTML.

    Returns:
        The HTML without role names and ``::`` markers.
    """
    html = _ROLE.sub("", html)
    html = _TILDE.sub(r"<code>\1</code>", html)
    return _LITERAL_MARK.sub(r"\1:</p>", html)
