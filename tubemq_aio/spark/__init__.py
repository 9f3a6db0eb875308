"""PySpark Structured Streaming source (and sink) for TubeMQ: ``pip install 'tubemq-aio[spark]'``.

Register with ``spark.dataSource.register(TubeMQDataSource)`` and use the short name
``"tubemq"``; the guide is ``docs/spark.md``.
"""

from __future__ import annotations

from tubemq_aio.spark.source import TubeMQDataSource

__all__ = ["TubeMQDataSource"]
