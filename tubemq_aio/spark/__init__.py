"""PySpark Structured Streaming source (and sink) for TubeMQ: the ``spark`` extra
(``pip install '.[spark]'`` in a clone of the repository; the package is not on an index yet).

Register with ``spark.dataSource.register(TubeMQDataSource)`` and use the short name
``"tubemq"``; the guide is ``docs/spark.md``.
"""

from __future__ import annotations

from tubemq_aio.spark.source import TubeMQDataSource

__all__ = ["TubeMQDataSource"]
