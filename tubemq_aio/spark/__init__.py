"""PySpark Structured Streaming source (and sink) for TubeMQ: the ``spark`` extra
(``pip install '.[spark]'`` in a clone of the repository; the package is not on an index yet).

Register with ``spark.dataSource.register(TubeMQDataSource)`` and use the short name
``"tubemq"``; the guide is ``docs/spark.md``.

``TubeMQDataSource`` is loaded on first access (``from tubemq_aio.spark import
TubeMQDataSource``), so importing a pyspark-free part of this package (``_options``,
``_offsets``, ``_bridge``, ...) does not import pyspark. Without pyspark that access raises
:class:`ModuleNotFoundError` naming the ``spark`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tubemq_aio.spark.source import TubeMQDataSource

__all__ = ["TubeMQDataSource"]


# Hidden from mypy, which reads ``TubeMQDataSource`` from the import above and so still refuses
# any other name taken from this package.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Load ``TubeMQDataSource`` (and pyspark with it) on first access (PEP 562).

        Raises:
            ModuleNotFoundError: pyspark is not installed (``name`` is ``"pyspark"``).
            AttributeError: ``name`` is not a public name of this package.
        """
        if name != "TubeMQDataSource":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        try:
            from tubemq_aio.spark.source import TubeMQDataSource
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.split(".", 1)[0] != "pyspark":
                raise
            raise ModuleNotFoundError(
                "tubemq_aio.spark needs pyspark: install the spark extra "
                "(pip install '.[spark]' in a clone of the repository)",
                name="pyspark",
            ) from exc
        globals()[name] = TubeMQDataSource
        return TubeMQDataSource
